// The runtime's threads carry their job in their name (hvrun-loop, hvrun-reader, ...), so a
// debugger, top -H or a stack dump says which part of the worker each one is.
#pragma once

#include <pthread.h>

#include <thread>
#include <utility>

namespace hvrun::detail {

// `name`: at most 15 characters (the kernel's limit).
template <typename Body>
std::thread start_named_thread(const char* name, Body body) {
  return std::thread([name, body = std::move(body)]() mutable {
    pthread_setname_np(pthread_self(), name);
    body();
  });
}

}  // namespace hvrun::detail
