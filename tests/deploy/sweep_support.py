"""What the hostile-input sweeps (flag_sweep, config_sweep, file_sweep) share: running one case
of the real binary with a time limit, the verdict every case must meet, and the report."""
import os
import subprocess

SLOWDOWN = int(os.environ.get("KVACTOR_TEST_SLOWDOWN", "1"))
TIMEOUT_S = 120 * SLOWDOWN


def run(args):
    """(exit code, stderr) of one case; (None, ...) when it ran past the limit."""
    try:
        r = subprocess.run(args, capture_output=True, timeout=TIMEOUT_S)
        return r.returncode, r.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return None, "(timed out)"


def ended_badly(code):
    """Why a case that must end by itself with 0, 1 or 2 did not; None when it did."""
    if code is None:
        return f"hung past {TIMEOUT_S} s"
    if code < 0:
        return f"killed by signal {-code}"
    if code not in (0, 1, 2):
        return f"exit {code}"
    return None


def last_line(err):
    return err.strip().splitlines()[-1:]


class sweep:
    """Counts cases and collects findings; report() prints them and gives the exit status."""

    def __init__(self, name):
        self.name = name
        self.cases = 0
        self.findings = []

    def judge(self, label, finding):
        self.cases += 1
        if finding:
            self.findings.append(f"{label}: {finding}")

    def report(self):
        for f in self.findings:
            print(f"{self.name}: {f}")
        if self.findings:
            print(f"{self.name}: {len(self.findings)} of {self.cases} cases failed")
            return 1
        print(f"{self.name}: ok ({self.cases} cases)")
        return 0
