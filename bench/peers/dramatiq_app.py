"""The Dramatiq peer (runs in the peers' virtualenv): one no-op actor on a queue of the run's namespace.

`dramatiq bench.peers.dramatiq_app -p 2 -t 8 -Q <queue>`: the RabbitMQ broker with its default middleware
and prefetch; Dramatiq declares `<queue>`, `<queue>.DQ` and `<queue>.XQ`.
"""

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker

from bench.peers import tasks

broker = RabbitmqBroker(url=tasks.AMQP_URL)
dramatiq.set_broker(broker)


@dramatiq.actor(actor_name="bench_peers_noop", queue_name=tasks.QUEUE, max_retries=0)
def noop() -> None:
    tasks.noop()
