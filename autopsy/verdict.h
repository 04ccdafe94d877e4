// The autopsy's verdict and its text report, from the job report (pure: no I/O).
//
// The verdict is one line naming the rank the others wait for (the one missing from the most
// stalled tensors, else the first that did not answer), its host, the oldest tensor it has not
// submitted and how many it is behind, and where it is: the stack of the thread that submits its
// collectives (its latest submission's thread, else the main thread), Python frames first,
// else native frames outside the system and hvrun libraries, outermost first, with the system
// call it sleeps in; for a rank that did not answer, its process state as the kernel shows it:
//   rank 3 on hostB has not submitted 'grad.fc1' (13 tensors behind); it is in
//   train.py:88 load_batch -> dataset.py:41 read (sleeping in read)
#pragma once

#include <string>

#include "hvrun.pb.h"

namespace hvrun {

std::string autopsy_verdict(const v1::AutopsyJobReport& report);

// The whole report for people: the verdict, the stalls, then every rank: what it waits in, its
// flight recorder's latest collectives, and every thread's state and stacks.
std::string autopsy_text(const v1::AutopsyJobReport& report);

// "read_batch" for "read_batch(int, char*)", "ns::f" for "ns::f(int) const".
std::string function_without_parameters(const std::string& function);

}  // namespace hvrun
