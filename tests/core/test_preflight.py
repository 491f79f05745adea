"""Before starting: a RabbitMQ that lists several nodes answers when one of them does."""

from app.preflight import missing_services, topology_problem
from tests.conftest import RABBITMQ_URL, make_settings
from tests.support import free_port


def _nowhere() -> str:
    return f"amqp://guest:guest@127.0.0.1:{free_port()}/"


async def test_a_cluster_answers_when_one_listed_node_does() -> None:
    settings = make_settings(rabbitmq_url=f"{_nowhere()},{RABBITMQ_URL}")
    assert not [p for p in await missing_services(settings) if p.startswith("RabbitMQ")]


async def test_a_cluster_none_of_whose_nodes_answers_is_named_node_by_node() -> None:
    first, second = _nowhere(), _nowhere()
    settings = make_settings(rabbitmq_url=f"{first},{second}")
    [problem] = [p for p in await missing_services(settings) if p.startswith("RabbitMQ")]
    ports = [url.rsplit(":", 1)[1].rstrip("/") for url in (first, second)]
    assert problem.startswith(f"RabbitMQ is not answering at 127.0.0.1:{ports[0]}, 127.0.0.1:{ports[1]}; start it")


async def test_a_broker_that_does_not_answer_is_no_topology_problem() -> None:
    assert await topology_problem(make_settings(rabbitmq_url=_nowhere())) is None
