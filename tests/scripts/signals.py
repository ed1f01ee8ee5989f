"""Wait for a signal and exit with a code that says which one arrived (SIGTERM 42, SIGINT 43)."""

import signal
import sys
import time


def on_term(signum, frame):
    print("got SIGTERM", flush=True)
    sys.exit(42)


signal.signal(signal.SIGTERM, on_term)
try:
    print("ready", flush=True)  # inside the try: the signal may come as soon as this line is out
    time.sleep(60)
except KeyboardInterrupt:
    print("got SIGINT", flush=True)
    sys.exit(43)
sys.exit(1)
