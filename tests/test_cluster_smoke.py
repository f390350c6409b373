"""The cluster's smoke subset, inside the test command: a real two-broker cluster (started here,
in 30-60 s) and one topic moved to the other broker between two halves of its messages, consumed
whole and once. The other cluster scenarios (kill -9, transfers, migration, the repeated fault
runs) belong to ``scripts/dev cluster``; tests/test_cluster.py holds them, this file takes one.
"""

import pytest

from test_cluster import client, cluster  # noqa: F401 - the fixtures the test below uses
from test_cluster import test_a_topic_unloaded_to_the_other_broker_loses_and_repeats_nothing  # noqa: F401

# The cluster's start counts against the first test's limit (as in tests/test_cluster.py).
pytestmark = pytest.mark.timeout(600)
