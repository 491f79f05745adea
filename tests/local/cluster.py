"""A three-node RabbitMQ cluster on this machine, beside the system broker, on ports of its own: nodes taskq-a,
taskq-b and taskq-c (@localhost), with their own data, log and config files and their own Erlang cookie, under one
folder. The system node (rabbit@localhost, port 5672) is never touched: it shares only epmd, which every Erlang
node on a host shares. `python -m bench.cluster` starts and stops one for trying it."""

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from app.core import parent
from tests.local.ports import free_ports

RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")  # the real scripts; /usr/sbin's wrappers switch user and drop the env
NODE_LETTERS = ("a", "b", "c")
START_SECONDS = 90
SYSTEM_NODE, SYSTEM_PORT = "rabbit@", 5672  # the machine's shared broker
CLI_PORTS = [5681, 25681, 5682, 25682, 5683, 25683]  # AMQP and distribution port of each node, in turn


@dataclass(frozen=True)
class Node:
    """One node: its name, its ports, and the folder holding its data, logs, config and cookie."""

    name: str
    amqp_port: int
    dist_port: int
    home: Path
    plugins: tuple[str, ...] = ()  # enabled at its start (none by default: the cluster's nodes need none)
    conf: str = ""  # lines added to its rabbitmq.conf

    def __post_init__(self) -> None:
        # Every node here is started, stopped and killed by tests: never the machine's own, which other runs use.
        if self.name.startswith(SYSTEM_NODE) or SYSTEM_PORT in (self.amqp_port, self.dist_port):
            raise ValueError(f"{self.name} on port {self.amqp_port} would be the machine's own RabbitMQ node")

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/"

    def env(self) -> dict[str, str]:
        """The environment its server and its CLI commands run with: nothing read from /etc/rabbitmq."""
        home = str(self.home)
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": home,  # $HOME/.erlang.cookie: the cluster's own cookie, for the nodes and the CLI alike
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.amqp_port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONF_ENV_FILE": f"{home}/rabbitmq-env.conf",
            "RABBITMQ_CONFIG_FILE": f"{home}/rabbitmq.conf",
            "RABBITMQ_ADVANCED_CONFIG_FILE": f"{home}/advanced.config",
            "RABBITMQ_ENABLED_PLUGINS_FILE": f"{home}/enabled_plugins",
            "RABBITMQ_MNESIA_BASE": f"{home}/mnesia",
            "RABBITMQ_LOG_BASE": f"{home}/log",
            "RABBITMQ_PID_FILE": f"{home}/node.pid",
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }

    def prepare(self, cookie: str) -> None:
        """Its folders, config files and Erlang cookie (a cluster's nodes share one)."""
        for folder in ("mnesia", "log"):
            (self.home / folder).mkdir(parents=True, exist_ok=True)
        cookie_file = self.home / ".erlang.cookie"
        cookie_file.unlink(missing_ok=True)
        cookie_file.write_text(cookie)
        cookie_file.chmod(0o400)
        (self.home / "rabbitmq-env.conf").write_text("")
        (self.home / "enabled_plugins").write_text(f"[{','.join(self.plugins)}].\n")
        (self.home / "advanced.config").write_text("[].\n")
        (self.home / "rabbitmq.conf").write_text(
            f"listeners.tcp.local = 127.0.0.1:{self.amqp_port}\nlog.file.level = warning\n{self.conf}"
        )

    def start(self, die_with_parent: bool = False) -> None:
        """Start the node (again, after `stop`, with the data it had) and wait until it runs."""
        log = (self.home / "log" / "server.out").open("ab")
        subprocess.Popen(
            [str(RABBITMQ_BIN / "rabbitmq-server")],
            env=self.env(),
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=partial(parent.die_with_parent, signal.SIGTERM) if die_with_parent else None,
        )
        log.close()
        deadline = time.monotonic() + START_SECONDS
        # await_startup needs a node that epmd knows already; until the VM registers, ping fails at once.
        while self.ctl("ping", check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not answer within {START_SECONDS}s")
            time.sleep(0.5)
        self.await_startup()

    def await_startup(self) -> None:
        self.ctl("await_startup", "--timeout", str(START_SECONDS), timeout=START_SECONDS + 10)

    def stop(self) -> None:
        """Stop the node the way an operator would (by its pid if it lingers); its data stays."""
        pid = _pid(self)  # read first: a node that stops cleanly removes its pid file before its VM has exited
        if self.home.exists():
            self.ctl("stop", timeout=60, check=False)
        _wait_gone(self, pid)

    def ctl(self, *args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`rabbitmqctl -n <node> ...` with the node's own cookie."""
        command = [str(RABBITMQ_BIN / "rabbitmqctl"), "-n", self.name, *args]
        result = subprocess.run(command, env=self.env(), capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(command[1:])} failed ({result.returncode}): {result.stderr.strip()}")
        return result


@dataclass
class Cluster:
    """Three nodes under one folder; `start()` and `stop()` may be called again for one node (`node_down/up`)."""

    root: Path
    nodes: list[Node]
    die_with_parent: bool = False

    @classmethod
    def plan(
        cls, root: Path, prefix: str = "taskq", ports: list[int] | None = None, die_with_parent: bool = False
    ) -> "Cluster":
        """Three nodes named <prefix>-a/b/c@localhost, on the ports given or on free ones."""
        ports = ports or free_ports(2 * len(NODE_LETTERS))
        nodes = [
            Node(f"{prefix}-{letter}@localhost", ports[2 * i], ports[2 * i + 1], root / letter)
            for i, letter in enumerate(NODE_LETTERS)
        ]
        return cls(root, nodes, die_with_parent)

    @property
    def url(self) -> str:
        """RABBITMQ_URL for the service: every node, comma-separated."""
        return ",".join(node.url for node in self.nodes)

    def node(self, name: str) -> Node:
        return next(node for node in self.nodes if node.name == name)

    def start(self) -> None:
        """Start the three nodes, join b and c to a, and wait until all three run in one cluster."""
        cookie = secrets.token_hex(20)
        for node in self.nodes:
            node.prepare(cookie)
            self.node_up(node)
        for node in self.nodes[1:]:
            node.ctl("stop_app")
            node.ctl("join_cluster", self.nodes[0].name)
            node.ctl("start_app")
        self.wait_until_running(len(self.nodes))
        self._save()

    def node_up(self, node: Node) -> None:
        """Start one node (again, after `node_down`, with the data it had) and wait until it runs."""
        node.start(self.die_with_parent)

    def node_down(self, node: Node) -> None:
        """Stop one node the way an operator would; its data stays for `node_up`."""
        node.stop()

    def wait_until_running(self, count: int) -> None:
        """Wait until some node reports `count` running nodes in its cluster."""
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            for node in self.nodes:
                if self.running_nodes(node) >= count:
                    return
            time.sleep(0.5)
        raise RuntimeError(f"the cluster did not reach {count} running nodes within {START_SECONDS}s")

    def running_nodes(self, via: Node) -> int:
        result = self.ctl(via, "cluster_status", "--formatter", "json", check=False)
        if result.returncode != 0:
            return 0
        return len(json.loads(result.stdout).get("running_nodes", []))

    def ctl(self, node: Node, *args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
        return node.ctl(*args, timeout=timeout, check=check)

    def queues(self, node: Node, *columns: str) -> list[dict[str, object]]:
        """`rabbitmqctl list_queues <columns>` as rows."""
        result = self.ctl(node, "list_queues", "--formatter", "json", *columns)
        rows: list[dict[str, object]] = json.loads(result.stdout)
        return rows

    def stop(self) -> None:
        """Stop every node (by rabbitmqctl, then by its pid if it lingers) and remove the folder."""
        pids = [_pid(node) for node in self.nodes]
        for node in self.nodes:
            if node.home.exists():
                node.ctl("stop", timeout=60, check=False)
        for node, pid in zip(self.nodes, pids, strict=True):
            _wait_gone(node, pid)
        shutil.rmtree(self.root, ignore_errors=True)

    def _save(self) -> None:
        plan = {"nodes": [[n.name, n.amqp_port, n.dist_port, str(n.home)] for n in self.nodes]}
        (self.root / "cluster.json").write_text(json.dumps(plan))

    @classmethod
    def load(cls, root: Path) -> "Cluster":
        plan = json.loads((root / "cluster.json").read_text())
        return cls(root, [Node(name, amqp, dist, Path(home)) for name, amqp, dist, home in plan["nodes"]])


@contextlib.contextmanager
def running_cluster(root: Path, prefix: str) -> Iterator[Cluster]:
    """A started cluster, stopped and removed on the way out whatever happened; its nodes die with this process."""
    cluster = Cluster.plan(root, prefix, die_with_parent=True)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def _pid(node: Node) -> int | None:
    try:
        return int((node.home / "node.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # the process may be reaped between the signal and the read: then it is gone
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except FileNotFoundError:
        return False


def _wait_gone(node: Node, pid: int | None, seconds: float = 30) -> None:
    """Wait for the node's VM (`pid`, read before it was asked to stop) to exit; SIGKILL it when it does not."""
    if pid is None:
        return
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    (node.home / "node.pid").unlink(missing_ok=True)
