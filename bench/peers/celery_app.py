"""The Celery peer (runs in the peers' virtualenv): one no-op task on a queue of the run's namespace.

`celery -A bench.peers.celery_app worker --pool prefork -c <cores> -Q <queue>`. Late acks, prefetch
multiplier 1, no result backend; remote control, task events, gossip, mingle and heartbeats off (the
bench starts the worker with the matching flags): nothing runs beside the task queue.
"""

from celery import Celery

from bench.peers import tasks

app = Celery("bench_peers", broker=tasks.AMQP_URL)
app.conf.update(
    task_default_queue=tasks.QUEUE,
    task_default_exchange=tasks.QUEUE,
    task_default_routing_key=tasks.QUEUE,
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    task_ignore_result=True,
    result_backend=None,
    worker_enable_remote_control=False,
    worker_send_task_events=False,
    task_send_sent_event=False,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)


@app.task(name="bench.peers.noop", ignore_result=True)
def noop() -> None:
    tasks.noop()
