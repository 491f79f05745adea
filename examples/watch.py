"""Submit jobs and watch them finish, with the typed Python client: `pip install ./clients/python`, then
`API=http://127.0.0.1:8000 KEY=<an API key> python examples/watch.py [N]`. It submits N echo jobs (3 by default)
as one batch, then follows each one's live stream, which starts with the job as it stands and ends once it finished,
printing every event it reads."""

import os
import sys

from taskq_client import Client

with Client(os.environ.get("API", "http://127.0.0.1:8000"), os.environ["KEY"]) as client:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    batch = client.submit_batch({"jobs": [{"job_type": "echo", "payload": {"n": n}} for n in range(count)]})
    for item in batch.items:
        for event in client.job_events_live(item.job.id):
            print(event.type, item.job.id, event.data["job"]["payload"], flush=True)
