"""The coordinator runtime and what it reads and writes: the internal topics of the group, share and transaction
coordinators (`coordinator_log`)."""
