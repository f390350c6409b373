"""Checks an installed magnetar wheel without a broker (the release matrix's hosted runners have
none): the extension loads, and the engine fails a connection to a closed port with its own
error instead of crashing."""

import magnetar

print(magnetar.__version__, magnetar.__file__)
try:
    magnetar.Client("pulsar://127.0.0.1:1", connect_timeout=2.0, operation_timeout=3.0,
                    max_backoff=0.5).create_producer("wheel-check")
except magnetar.PulsarError as e:
    print("engine ok:", type(e).__name__)
else:
    raise SystemExit("connected to a closed port?")
