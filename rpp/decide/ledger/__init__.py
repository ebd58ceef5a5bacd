"""The ledger: what the pool wrote down against what really happened.

Where it sits: decide, above capacity (a create's intent needs the create backoff) and
beside the release. Status is the pool's only memory, so this package keeps it honest:
`intents` (written ahead of every RunPod write, settled after a crash), `membership`
(pods the pool owns that status does not know, adopted), `rebuild` (a lost status
rebuilt from ground truth), `unreadable` (pods whose RunPod answer did not read, held
still), `second_controller` and `write_failures` (other writers and status writes that
fail, named in conditions).
"""
