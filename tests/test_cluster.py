"""End to end: ``ray job submit --working-dir <repo> -- offline-rl train`` on a Ray cluster.

Starts a private single-node Ray head (own temp dir, ports and auth token, so neither side can
connect to the other's instance by accident), submits a short BC run, then checks the results
and that the job's driver joined this cluster rather than starting a local Ray instance.
The test does not use the ``ray_session`` fixture and never calls ``ray.init`` itself.

Teardown never runs ``ray stop``: it stops every Ray instance on the machine, the session's too.
Instead the head runs as ``ray start --block``; SIGTERM makes it stop exactly the processes it
started, and anything left over that carries this cluster's marker environment variable (for
example a job driver, which Ray starts in its own session) is then killed.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

pytest.importorskip("aiohttp", reason="ray[default] (Ray's dashboard and job server) is not "
                                      "installed: pip install 'offline-rl[cluster]'")

REPO = Path(__file__).resolve().parents[1]
#: The environment's scripts folder: the ``ray`` and ``offline-rl`` console scripts.
BIN = Path(sys.executable).parent
#: Environment variable set in every process of the test cluster (value: its temp dir).
MARKER = "OFFLINE_RL_TEST_CLUSTER"
JOB_ID = "offline-rl-cluster-test"
ITERATIONS = 4
# Seconds; they add up to less than the test's timeout. The run itself takes ~70 s on 2 cores.
HEAD_START_TIMEOUT = 90
SUBMIT_TIMEOUT = 300
CLI_TIMEOUT = 30
STOP_TIMEOUT = 30


@dataclass(frozen=True)
class Cluster:
    """A running test head: its GCS port, job server address and the env to talk to it."""

    gcs_port: int
    address: str
    env: dict[str, str]

    def ray(self, *args: str, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """Runs the ``ray`` CLI against this cluster (pass ``--address self.address``)."""
        return subprocess.run([str(BIN / "ray"), *args], env=self.env, cwd=REPO,
                              capture_output=True, text=True, timeout=timeout)


@pytest.fixture()
def ray_cluster() -> Iterator[Cluster]:
    """A single-node Ray head, its job server on loopback; stopped with all its processes."""
    with contextlib.ExitStack() as cleanup:  # unwinds on failure too, last step first
        temp_dir = tempfile.mkdtemp(prefix="orl")  # short: Ray's unix sockets live under it
        cleanup.callback(shutil.rmtree, temp_dir, ignore_errors=True)
        gcs_port, dashboard_port, client_port, agent_port = _free_ports(4)
        env = _cluster_env(temp_dir)
        command = [
            str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
            f"--port={gcs_port}", "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard_port}", "--num-cpus=2", "--include-dashboard=true",
            f"--temp-dir={temp_dir}", "--disable-usage-stats",
            # Off the fixed default ports (10001, 52365, 10002-19999) another instance may hold.
            f"--ray-client-server-port={client_port}",
            f"--dashboard-agent-listen-port={agent_port}",
            "--min-worker-port=0", "--max-worker-port=0",
        ]
        log_path = Path(temp_dir) / "head.log"
        with log_path.open("w") as log:
            head = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        cleanup.callback(_stop_head, head, temp_dir)
        cluster = Cluster(gcs_port, f"http://127.0.0.1:{dashboard_port}", env)
        _wait_until_ready(cluster, head, log_path, agent_port)
        yield cluster


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_job_submit_trains_on_the_cluster(ray_cluster: Cluster, cartpole_data: Path,
                                          tmp_path: Path) -> None:
    config = _write_config(tmp_path / "bc.yaml", cartpole_data)
    output = tmp_path / "run"

    submitted = ray_cluster.ray(
        "job", "submit", "--address", ray_cluster.address, "--submission-id", JOB_ID,
        "--working-dir", str(REPO), "--", "offline-rl", "train", str(config),
        "--max-iterations", str(ITERATIONS), "--output-dir", str(output), timeout=SUBMIT_TIMEOUT)
    assert submitted.returncode == 0, _tail(submitted)
    summary = _last_json_line(submitted.stdout)  # the train command's summary, streamed back
    assert summary["iterations"] == ITERATIONS
    assert summary["checkpoint"] == str(output / "checkpoint")

    # The driver joined this cluster (RAY_ADDRESS, set by the job server) and registered with
    # its GCS: a driver that started its own Ray would not be listed.
    listed = ray_cluster.ray("list", "jobs", "--address", ray_cluster.address, "--format", "json")
    assert listed.returncode == 0, _tail(listed)
    (job,) = [job for job in json.loads(listed.stdout) if job["submission_id"] == JOB_ID]
    assert job["status"] == "SUCCEEDED"
    assert job["driver_info"] is not None and job["driver_info"]["id"] == job["job_id"]

    results = [json.loads(line) for line in (output / "result.json").read_text().splitlines()]
    assert [result["training_iteration"] for result in results] == list(range(1, ITERATIONS + 1))
    with (output / "progress.csv").open(newline="") as file:
        assert len(list(csv.DictReader(file))) == ITERATIONS
    assert any((output / "checkpoint").iterdir())


def _free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports that are free on loopback right now."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def _cluster_env(temp_dir: str) -> dict[str, str]:
    """The environment of the head (inherited by its workers and job drivers) and the CLI calls."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_TOKEN_PATH")}
    env.update({
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",  # job drivers run `offline-rl`
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),  # not the user's ~/.ray/auth_token
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",  # SIGTERM: stop now, no 30 s drain
        MARKER: temp_dir,
    })
    return env


def _wait_until_ready(cluster: Cluster, head: subprocess.Popen, log_path: Path,
                      agent_port: int) -> None:
    """Polls the job server until it answers and the head's dashboard agent, which runs the
    submitted jobs, listens (or the head exits, or the deadline passes): the job server
    answers before the agent is up, and a submission waits only 10 s for it ("No available
    agent to submit job", seen on a loaded 2-core machine)."""
    request = urllib.request.Request(f"{cluster.address}/api/jobs/", headers={
        "Authorization": f"Bearer {cluster.env['RAY_AUTH_TOKEN']}"})
    deadline = time.monotonic() + HEAD_START_TIMEOUT
    while time.monotonic() < deadline:
        if head.poll() is not None:
            pytest.fail(f"ray start exited with {head.returncode}:\n{log_path.read_text()}")
        with contextlib.suppress(OSError):  # refused, reset, or HTTP errors while starting
            with (urllib.request.urlopen(request, timeout=5),
                  socket.create_connection(("127.0.0.1", agent_port), timeout=5)):
                return
        time.sleep(0.5)
    pytest.fail(f"the job server or its dashboard agent did not answer in {HEAD_START_TIMEOUT} s:"
                f"\n{log_path.read_text()}")


def _stop_head(head: subprocess.Popen, temp_dir: str) -> None:
    """Stops the head's ``ray start --block``, then kills whatever of its cluster is left."""
    if head.poll() is None:
        head.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            head.wait(timeout=STOP_TIMEOUT)
    for pid in _marked_pids(temp_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if head.poll() is None:
        head.kill()
    head.wait()


def _marked_pids(temp_dir: str) -> list[int]:
    """Processes whose environment has ``MARKER=temp_dir`` (Linux; elsewhere none are found)."""
    marker = f"{MARKER}={temp_dir}".encode()
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):  # gone, or not ours to read
            if marker in environ.read_bytes().split(b"\0"):
                pids.append(int(environ.parent.name))
    return pids


def _write_config(path: Path, dataset: Path) -> Path:
    """A small BC config in the YAML layout of configs/, reading ``dataset`` by absolute path."""
    config = {
        "algorithm": "BC",
        "environment": {"env": "CartPole-v1"},
        "training": {"lr": 0.003, "train_batch_size_per_learner": 512},
        "offline_data": {"input_": str(dataset.resolve()), "dataset_num_iters_per_learner": 5},
        "evaluation": {"evaluation_interval": 2, "evaluation_duration": 5},
        "rl_module": {"model_config": {"fcnet_hiddens": [64, 64], "fcnet_activation": "relu"}},
        "debugging": {"seed": 0},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _last_json_line(text: str) -> dict:
    """The last line of ``text`` that is a JSON object."""
    for line in reversed(text.splitlines()):
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    raise AssertionError(f"no JSON line in:\n{text}")


def _tail(process: subprocess.CompletedProcess[str], chars: int = 4000) -> str:
    """The end of a finished command's output, for assertion messages."""
    return f"exit {process.returncode}\n{process.stdout[-chars:]}\n{process.stderr[-chars:]}"
