"""The exit statuses of every borrowguard command, in one place (as pip's `status_codes`).

0, 1 and 2 are verdicts: verify's PASS / FAIL / ERROR-or-INCOMPLETE, doctor's and scan's "nothing" /
"warnings" / "errors". A user mistake is 2 as well: nothing could be judged. The rest are what a shell
expects of a wrapper (`borrowguard run`) and a filter whose reader went away.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # verify: PASS; doctor, scan: no known problem (or notes only)
    PROBLEM = 1  # verify: FAIL; doctor, scan: warnings
    ERROR = 2  # verify: ERROR or INCOMPLETE; doctor, scan: errors (warnings with --strict); a user mistake
    NOT_EXECUTABLE = 126  # run: the command exists but cannot be executed
    NOT_FOUND = 127  # run: no such command
    BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of our output went away; never mistaken for a verdict
