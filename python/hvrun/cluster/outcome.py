"""What one rank's run came to, and the driver's exception when ranks failed."""
from dataclasses import dataclass, field

import cloudpickle

from hvrun.exceptions import HvrunError


@dataclass
class RankOutcome:
    """`value`: the pickled result when `ok`; `cause`: what went wrong otherwise (an exception's
    text, or how the process ended); `collateral`: the rank failed because the job was aborted
    for another rank's failure (hvrun's HorovodInternalError), so it is named after those that
    failed first."""
    rank: int
    host: str
    ok: bool
    value: bytes = None
    cause: str = None
    collateral: bool = False
    output_tail: list = field(default_factory=list)  # its last lines, for the driver's message

    def result(self):
        return cloudpickle.loads(self.value)


class JobFailed(HvrunError):
    """Ranks failed. `failures`: their RankOutcomes, first causes first; `coordinator_verdict`:
    what hvrun's coordinator said about the job (its first cause), when it said anything."""

    def __init__(self, engine, failures, coordinator_verdict=""):
        self.failures = failures
        self.coordinator_verdict = coordinator_verdict
        lines = ["%s: %d of the job's ranks failed" % (engine, len(failures))]
        for outcome in failures:
            lines.append("  rank %d on host %s: %s%s" % (
                outcome.rank, outcome.host, outcome.cause,
                " (after the job was aborted)" if outcome.collateral else ""))
        if coordinator_verdict:
            lines.append("hvrun's coordinator: " + coordinator_verdict)
        first = failures[0] if failures else None
        if first is not None and first.output_tail:
            lines.append("last lines of rank %d:" % first.rank)
            lines.extend("  " + line for line in first.output_tail)
        super().__init__("\n".join(lines), "ABORTED")


def results_in_rank_order(engine, outcomes, size, coordinator_verdict=""):
    """Each rank's result, rank 0 first; JobFailed naming every failed (or missing) rank."""
    by_rank = {outcome.rank: outcome for outcome in outcomes}
    missing = [r for r in range(size) if r not in by_rank]
    failures = sorted((o for o in outcomes if not o.ok), key=lambda o: (o.collateral, o.rank))
    failures += [RankOutcome(r, "?", False, cause="returned no outcome") for r in missing]
    if failures:
        raise JobFailed(engine, failures, coordinator_verdict)
    return [by_rank[r].result() for r in range(size)]
