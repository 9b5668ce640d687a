"""A server that lost the twin's library (FUNCTION FLUSH, a restart without
persistence) or never had the module: the clients load the library again and
answer, or raise the error of that failure; the storages' ``check()`` says
whether the server can answer. Each test starts its own server (``bare``)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.cluster
from limits import RateLimitItemPerMinute
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

import redis_cell.limits  # noqa: F401
from redis_cell import (
    ArgumentError,
    AsyncCell,
    Cell,
    Decision,
    Engine,
    EngineNotFoundError,
    LibraryMissingError,
    ModuleMissingError,
    WrongTypeError,
)
from redis_cell.errors import from_response

from .conftest import _env, server_binary, servers, twin_engine

FRESH = Decision(False, 2, 1, -1, 60)

# The twin's engine on this run's servers: "eval" where there are no functions.
needs_functions = pytest.mark.skipif(
    twin_engine() != "functions", reason="no functions on this server (Redis 6.2)"
)


def _functions(server: Any) -> bool:
    return bool(servers().has_functions(server))


def _library(client: redis.Redis) -> list[Any]:
    return list(client.execute_command("FUNCTION LIST", "LIBRARYNAME", "redis_cell"))


def _sync_clients(port: int) -> list[Any]:
    import valkey

    return [redis.Redis("127.0.0.1", port), valkey.Valkey("127.0.0.1", port)]


def _async_clients(port: int) -> list[Any]:
    import coredis
    import valkey.asyncio

    return [
        redis.asyncio.Redis(host="127.0.0.1", port=port),
        valkey.asyncio.Valkey(host="127.0.0.1", port=port),
        coredis.Redis(host="127.0.0.1", port=port),
    ]


async def _aclose(client: Any) -> None:
    if hasattr(client, "aclose"):
        await client.aclose()
    else:
        client.connection_pool.disconnect()


def test_function_flush_then_a_call_reloads_the_library(bare: Any) -> None:
    if not _functions(bare):
        # Redis 6.2: no functions at all; the engine says so with its own class.
        for client in _sync_clients(bare.port):
            with pytest.raises(LibraryMissingError, match="FCALL"):
                Cell(client, engine="functions").throttle("k", 1, 1, 60)
            client.close()
        return
    for client in _sync_clients(bare.port):
        key = f"t:{uuid.uuid4().hex}"
        cell = Cell(client)
        cell.load_functions()
        assert cell.throttle(key + ":a", 1, 1, 60) == FRESH
        bare.client.execute_command("FUNCTION FLUSH")
        assert cell.throttle(key, 1, 1, 60) == FRESH
        assert cell.throttle(key, 1, 1, 60).remaining == 0
        assert _library(bare.client)
        # A client that never loaded it, told to use the functions: the same.
        bare.client.execute_command("FUNCTION FLUSH")
        assert Cell(client, engine="functions").sw_allow(key + ":s", 2, 60).remaining == 1
        client.close()


async def test_function_flush_then_an_async_call_reloads_the_library(bare: Any) -> None:
    if not _functions(bare):
        for client in _async_clients(bare.port):
            with pytest.raises(LibraryMissingError, match="FCALL"):
                await AsyncCell(client, engine="functions").throttle("k", 1, 1, 60)
            await _aclose(client)
        return
    for client in _async_clients(bare.port):
        key = f"t:{uuid.uuid4().hex}"
        cell = AsyncCell(client)
        await cell.load_functions()
        assert await cell.throttle(key + ":a", 1, 1, 60) == FRESH
        bare.client.execute_command("FUNCTION FLUSH")
        assert await cell.throttle(key, 1, 1, 60) == FRESH
        assert (await cell.fw_incr(key + ":f", 3, 60)).remaining == 2
        assert _library(bare.client), type(client)
        await _aclose(client)


@needs_functions
def test_clients_reloading_at_once_all_succeed(bare: Any) -> None:
    """Clients of their own (processes, say) that find the library missing at
    once each load it: FUNCTION LOAD REPLACE replaces, it never fails as
    "library already exists". Threads or tasks sharing one Cell send one
    FUNCTION LOAD between them."""
    Cell(bare.client).load_functions()
    key = f"t:{uuid.uuid4().hex}"

    def burst(cell_of: Any, name: str) -> list[Any]:
        bare.client.execute_command("FUNCTION FLUSH")
        results: list[Any] = []
        start = threading.Barrier(8)

        def call() -> None:
            cell = cell_of()
            start.wait()
            try:
                results.append(cell.sw_allow(key + name, 100, 60))
            except Exception as error:
                results.append(error)

        threads = [threading.Thread(target=call) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(isinstance(r, Decision) for r in results), results
        return sorted(r.remaining for r in results)

    clients: list[redis.Redis] = []

    def own_cell() -> Cell:
        clients.append(redis.Redis("127.0.0.1", bare.port))
        return Cell(clients[-1], engine="functions")

    assert burst(own_cell, ":own") == list(range(92, 100))
    shared = Cell(redis.Redis("127.0.0.1", bare.port), engine="functions")
    before = _commandstats(bare.client, "function|load")["calls"]
    assert burst(lambda: shared, ":shared") == list(range(92, 100))
    assert _commandstats(bare.client, "function|load")["calls"] - before == 1

    async def many() -> list[Decision]:
        bare.client.execute_command("FUNCTION FLUSH")
        client = redis.asyncio.Redis(host="127.0.0.1", port=bare.port)
        cell = AsyncCell(client, engine="functions")
        out = await asyncio.gather(*(cell.fw_incr(key + ":f", 100, 60) for _ in range(10)))
        await client.aclose()
        return list(out)

    before = _commandstats(bare.client, "function|load")["calls"]
    assert sorted(d.remaining for d in asyncio.run(many())) == list(range(90, 100))
    assert _commandstats(bare.client, "function|load")["calls"] - before == 1
    for client in clients:
        client.close()


def _commandstats(client: redis.Redis, name: str) -> dict[str, int]:
    stats: Any = client.info("commandstats")
    entry = stats.get(f"cmdstat_{name}", {})
    return {k: int(v) for k, v in entry.items() if k in ("calls", "rejected_calls")}


@needs_functions
def test_a_library_that_cannot_be_loaded_raises_once(bare: Any) -> None:
    """An ACL user that may call the functions but not load them: the error
    of its own class, after one load attempt per call, not a loop."""
    Cell(bare.client).load_functions()
    bare.client.execute_command("ACL SETUSER", "app", "on", ">pw", "~*", "+@all", "-function|load")
    bare.client.execute_command("FUNCTION FLUSH")
    client = redis.Redis("127.0.0.1", bare.port, username="app", password="pw")
    cell = Cell(client, engine="functions")
    before = _commandstats(bare.client, "function|load").get("rejected_calls", 0)
    with pytest.raises(LibraryMissingError) as error:
        cell.throttle("k", 1, 1, 60)
    assert isinstance(error.value, EngineNotFoundError)
    assert error.value.message.startswith("ERR Function not found: the server has lost")
    assert "NOPERM" in error.value.message or "permission" in error.value.message
    after = _commandstats(bare.client, "function|load").get("rejected_calls", 0)
    assert after - before == 1

    async def burst() -> list[Any]:
        aclient = redis.asyncio.Redis(
            host="127.0.0.1", port=bare.port, username="app", password="pw"
        )
        acell = AsyncCell(aclient, engine="functions")
        calls = (acell.throttle("k", 1, 1, 60) for _ in range(5))
        out = await asyncio.gather(*calls, return_exceptions=True)
        await aclient.aclose()
        return list(out)

    # Five calls at once on one AsyncCell: one refused load, five errors.
    assert all(isinstance(r, LibraryMissingError) for r in asyncio.run(burst()))
    again = _commandstats(bare.client, "function|load").get("rejected_calls", 0)
    assert again - after == 1
    uri = f"rediscell://app:pw@127.0.0.1:{bare.port}?engine=functions"
    storage = storage_from_string(uri)
    assert storage.check() is False
    with pytest.raises(LibraryMissingError):
        FixedWindowRateLimiter(storage).hit(RateLimitItemPerMinute(1), "x")
    # Loaded again by a user who may: the same storage answers.
    Cell(bare.client).load_functions()
    assert storage.check() is True
    assert FixedWindowRateLimiter(storage).hit(RateLimitItemPerMinute(1), "x")
    client.close()


def _restart(server: Any) -> Any:
    """Killed and started again on its port (as a crash and a restart):
    without persistence, nothing is kept."""
    server.restart()
    return server


def test_a_restart_without_persistence_then_a_call_succeeds(bare: Any) -> None:
    # Redis 6.2: the EVAL engine, whose script the restart drops too.
    engine = Engine.FUNCTIONS if _functions(bare) else Engine.EVAL
    if engine is Engine.FUNCTIONS:
        Cell(bare.client).load_functions()
    port = bare.port
    sync_client = redis.Redis("127.0.0.1", port)
    cell = Cell(sync_client, engine=engine)
    storage = storage_from_string(f"rediscell://127.0.0.1:{port}?engine={engine.value}")
    item = RateLimitItemPerMinute(2)
    key = f"t:{uuid.uuid4().hex}"
    assert cell.throttle(key, 1, 1, 60) == FRESH
    assert MovingWindowRateLimiter(storage).hit(item, key)
    assert storage.check()

    async def async_call(client: redis.asyncio.Redis) -> Decision:
        return await AsyncCell(client, engine=engine).fw_incr(key, 2, 60)

    async def twice() -> list[Decision]:
        client = redis.asyncio.Redis(host="127.0.0.1", port=port)
        first = await async_call(client)
        nonlocal server
        server = _restart(server)
        second = await async_call(client)
        await client.aclose()
        return [first, second]

    server = _restart(bare)
    try:
        if engine is Engine.FUNCTIONS:
            assert not _library(server.client)
        assert storage.check()
        assert MovingWindowRateLimiter(storage).hit(item, key)
        server = _restart(server)
        assert cell.throttle(key, 1, 1, 60) == FRESH
        server = _restart(server)
        first, second = asyncio.run(twice())
        assert first.remaining == 1 and second.remaining == 1
    finally:
        server.stop()
        sync_client.close()


def test_a_server_without_the_module(bare: Any) -> None:
    """The module engine where the module is not loaded: EngineNotFoundError's
    ModuleMissingError with the server's text, not a bad-arguments error."""
    for client in _sync_clients(bare.port):
        with pytest.raises(ModuleMissingError) as error:
            Cell(client, engine="module").sw_allow("k", 1, 60)
        assert isinstance(error.value, EngineNotFoundError)
        assert not isinstance(error.value, ArgumentError)
        assert error.value.message.startswith("ERR unknown command")
        assert "SW.ALLOW" in error.value.message
        client.close()

    async def run() -> None:
        for client in _async_clients(bare.port):
            with pytest.raises(ModuleMissingError, match=r"CL\.THROTTLE"):
                await AsyncCell(client, engine="module").throttle("k", 1, 1, 60)
            await _aclose(client)

    asyncio.run(run())
    storage = storage_from_string(f"rediscell://127.0.0.1:{bare.port}?engine=module")
    assert storage.check() is False
    with pytest.raises(ModuleMissingError):
        MovingWindowRateLimiter(storage).hit(RateLimitItemPerMinute(1), "x")
    # Detected: neither engine there (no library loaded on this server).
    detected = storage_from_string(f"rediscell://127.0.0.1:{bare.port}")
    assert detected.check() is False
    with pytest.raises(EngineNotFoundError, match="load_functions"):
        FixedWindowRateLimiter(detected).hit(RateLimitItemPerMinute(1), "x")


@pytest.mark.parametrize("implementation", ["redispy", "coredis", "valkey"])
async def test_async_check_says_the_truth(implementation: str, bare: Any) -> None:
    ours = f"async+rediscell://127.0.0.1:{_env('CELL_MODULE_PORT')}"
    healthy = storage_from_string(ours, implementation=implementation)
    assert await healthy.check() is True
    uri = f"async+rediscell://127.0.0.1:{bare.port}?engine=module"
    storage = storage_from_string(uri, implementation=implementation)
    assert await storage.check() is False
    if _functions(bare):
        Cell(bare.client).load_functions()
        bare.client.execute_command("FUNCTION FLUSH")
        uri = f"async+rediscell://127.0.0.1:{bare.port}?engine=functions"
        functions = storage_from_string(uri, implementation=implementation)
        # Not loaded, but loadable: check() loads it and answers True.
        assert await functions.check() is True
        assert _library(bare.client)
    bare.stop()
    assert await healthy.check() is True
    down = storage_from_string(
        f"async+rediscell://127.0.0.1:{bare.port}?engine=module", implementation=implementation
    )
    assert await down.check() is False


def test_check_is_false_when_the_server_is_down(bare: Any) -> None:
    storage = storage_from_string(f"rediscell://127.0.0.1:{bare.port}?engine=module")
    bare.stop()
    assert storage.check() is False


def _node_of(cluster: redis.cluster.RedisCluster, key: str) -> redis.Redis:
    node = cluster.get_node_from_key(key)
    return redis.Redis(node.host, node.port)


@needs_functions
def test_cluster_node_that_lost_the_library(cluster: redis.cluster.RedisCluster) -> None:
    """The functions engine on a cluster (the module's, told to use the
    twin): the node a key lives on flushes its library; the call on that key
    loads it there again and succeeds, sync and asyncio."""
    cell = Cell(cluster, engine="functions")
    cell.load_functions()
    try:
        # One hash tag: every key below lives on the node that flushes.
        key = f"{{t:{uuid.uuid4().hex}}}"
        assert cell.throttle(key + ":a", 1, 1, 60) == FRESH
        node = _node_of(cluster, key)
        node.execute_command("FUNCTION FLUSH")
        assert cell.throttle(key, 1, 1, 60) == FRESH
        assert _library(node)

        # valkey-py's sync cluster client, and every asyncio one.
        import coredis
        import valkey.asyncio.cluster
        import valkey.cluster

        port = int(_env("CELL_CLUSTER_PORTS").split(",")[0])
        node.execute_command("FUNCTION FLUSH")
        vcluster = valkey.cluster.ValkeyCluster(host="127.0.0.1", port=port)
        assert Cell(vcluster, engine="functions").sw_allow(key + ":v", 2, 60).remaining == 1
        vcluster.close()
        assert _library(node)
        clients = {
            "redis-py": lambda: redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=port),
            "valkey-py": lambda: valkey.asyncio.cluster.ValkeyCluster(host="127.0.0.1", port=port),
            "coredis": lambda: coredis.RedisCluster(host="127.0.0.1", port=port),
        }

        async def run(family: str) -> Decision:
            client: Any = clients[family]()
            try:
                acell = AsyncCell(client, engine="functions")
                return await acell.fw_incr(f"{key}:{family}", 2, 60)
            finally:
                await _aclose(client)

        for family in clients:
            node.execute_command("FUNCTION FLUSH")
            assert asyncio.run(run(family)).remaining == 1, family
            assert _library(node), family
        node.close()
    finally:
        # The cluster is the module's: leave it without the library, as found.
        cluster.execute_command("FUNCTION FLUSH", target_nodes=redis.cluster.RedisCluster.PRIMARIES)


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        ("ERR Function not found", LibraryMissingError),
        ("ERR unknown command `FCALL`, with args beginning with: ", LibraryMissingError),
        ("ERR unknown command 'CL.THROTTLE', with args beginning with: 'k' ", ModuleMissingError),
        ("ERR unknown command `SW.ALLOW`, with args beginning with: `k` ", ModuleMissingError),
        ("ERR unknown command 'GCRA', with args beginning with: 'k' ", ModuleMissingError),
        ("ERR unknown command 'NOPE', with args beginning with: ", ArgumentError),
        ("WRONGTYPE Operation against a key holding the wrong kind of value", WrongTypeError),
        (
            "ERR key holds a string that is not a valid CL.THROTTLE state "
            "(an integer TAT in nanoseconds)",
            WrongTypeError,
        ),
        ("ERR key holds an exact sliding window; APPROX needs a key of its own", WrongTypeError),
        ("ERR invalid quantity: must be 0 or greater", ArgumentError),
        ("ERR unknown policy 'Function not found'", ArgumentError),
    ],
)
def test_each_reply_has_its_class(reply: str, kind: type) -> None:
    error = from_response(reply)
    assert type(error) is kind and error.message == reply


@needs_functions
def test_a_refused_load_is_shared_by_calls_answered_after_it(bare: Any) -> None:
    """Two calls of one Cell (threads) or one AsyncCell (tasks) find the
    library missing; the second's reply is held until the first's load was
    refused. The second takes that refusal instead of sending a load of its
    own: one refused FUNCTION LOAD for both, whatever order the replies come
    in."""
    Cell(bare.client).load_functions()
    bare.client.execute_command("ACL SETUSER", "app", "on", ">pw", "~*", "+@all", "-function|load")
    bare.client.execute_command("FUNCTION FLUSH")

    def rejected() -> int:
        return _commandstats(bare.client, "function|load").get("rejected_calls", 0)

    client = redis.Redis("127.0.0.1", bare.port, username="app", password="pw")
    cell = Cell(client, engine="functions")
    real = client.execute_command
    answered, refused = threading.Event(), threading.Event()
    outcomes: list[Any] = []

    def held(*words: Any, **options: Any) -> Any:
        try:
            return real(*words, **options)
        except Exception:
            if words[0] == "FCALL" and threading.current_thread() is second:
                answered.set()
                refused.wait(10)
            raise
        finally:
            if words[0] == "FUNCTION LOAD":
                refused.set()

    def call() -> None:
        try:
            outcomes.append(cell.throttle("k", 1, 1, 60))
        except Exception as error:
            outcomes.append(error)

    client.execute_command = held  # type: ignore[method-assign]
    before = rejected()
    second = threading.Thread(target=call)
    second.start()
    assert answered.wait(10)
    call()
    second.join()
    client.close()
    assert [type(o) for o in outcomes] == [LibraryMissingError] * 2, outcomes
    assert rejected() - before == 1

    async def two() -> list[Any]:
        aclient = redis.asyncio.Redis(
            host="127.0.0.1", port=bare.port, username="app", password="pw"
        )
        acell = AsyncCell(aclient, engine="functions")
        areal = aclient.execute_command
        arefused = asyncio.Event()
        sent: list[int] = []

        async def aheld(*words: Any, **options: Any) -> Any:
            late = False
            try:
                if words[0] == "FCALL":
                    sent.append(1)
                    late = len(sent) == 2
                return await areal(*words, **options)
            except Exception:
                if late:
                    await asyncio.wait_for(arefused.wait(), 10)
                raise
            finally:
                if words[0] == "FUNCTION LOAD":
                    arefused.set()

        aclient.execute_command = aheld  # type: ignore[method-assign]
        out = await asyncio.gather(
            acell.throttle("k", 1, 1, 60), acell.throttle("k", 1, 1, 60), return_exceptions=True
        )
        await aclient.aclose()
        return list(out)

    before = rejected()
    out = asyncio.run(two())
    assert [type(o) for o in out] == [LibraryMissingError] * 2, out
    assert rejected() - before == 1


@pytest.mark.parametrize("implementation", [None, "redispy", "coredis", "valkey"])
async def test_check_is_true_when_its_key_holds_something_else(
    implementation: str | None, bare: Any
) -> None:
    """check() reads one key through the engine; a key of that name holding
    another kind of value is an answer of the engine, not a server down."""
    engine = "functions" if _functions(bare) else "eval"
    if engine == "functions":
        Cell(bare.client).load_functions()
    bare.client.rpush("LIMITS:redis-cell:check", "x")
    uri = f"rediscell://127.0.0.1:{bare.port}?engine={engine}"
    if implementation is None:
        assert storage_from_string(uri).check() is True
    else:
        storage = storage_from_string("async+" + uri, implementation=implementation)
        assert await storage.check() is True


async def test_a_detected_module_that_goes_away_is_detected_again(bare: Any) -> None:
    """A Cell (an AsyncCell) that found the module, whose server is then one
    without it and with the twin's library loaded (a restart without
    loadmodule; here the Cells' clients are given such a server):
    ModuleMissingError once, then detection again, which finds the twin. A
    Cell told engine="module" keeps it."""
    module_port = int(_env("CELL_MODULE_PORT"))
    client = redis.Redis("127.0.0.1", module_port)
    aclient = redis.asyncio.Redis(host="127.0.0.1", port=module_port)
    detected, told, adetected = Cell(client), Cell(client, engine="module"), AsyncCell(aclient)
    key = f"t:{uuid.uuid4().hex}"
    assert detected.engine is Engine.MODULE and told.fw_incr(key, 5, 60).remaining == 4
    assert await adetected.engine() is Engine.MODULE
    gone = redis.Redis("127.0.0.1", bare.port)
    agone = redis.asyncio.Redis(host="127.0.0.1", port=bare.port)
    detected.client = told.client = gone
    adetected.client = agone
    try:
        functions = _functions(bare)
        if functions:
            Cell(bare.client).load_functions()
        for cell in (detected, told, told):
            with pytest.raises(ModuleMissingError):
                cell.fw_incr("m", 5, 60)
        assert told.engine is Engine.MODULE
        with pytest.raises(ModuleMissingError):
            await adetected.fw_incr("a", 5, 60)
        if functions:
            assert detected.fw_incr("m", 5, 60).remaining == 4
            assert detected.engine is Engine.FUNCTIONS
            assert (await adetected.fw_incr("a", 5, 60)).remaining == 4
        else:
            # Redis 6.2: no functions; detection finds neither engine.
            with pytest.raises(EngineNotFoundError, match="load_functions"):
                detected.fw_incr("m", 5, 60)
            with pytest.raises(EngineNotFoundError, match="load_functions"):
                await adetected.fw_incr("a", 5, 60)
    finally:
        await aclient.aclose()
        await agone.aclose()
        client.close()
        gone.close()


@needs_functions
async def test_a_reload_whose_callers_were_cancelled_is_not_logged(bare: Any) -> None:
    """The caller that started a reload is cancelled while the load is under
    way and the load then fails: its error is not reported by asyncio as a
    task exception never retrieved."""
    import gc

    Cell(bare.client).load_functions()
    bare.client.execute_command("FUNCTION FLUSH")
    client = redis.asyncio.Redis(host="127.0.0.1", port=bare.port)
    cell = AsyncCell(client, engine="functions")
    real = client.execute_command
    release = asyncio.Event()

    async def failing_load(*words: Any, **options: Any) -> Any:
        if words[0] == "FUNCTION LOAD":
            await release.wait()
            raise redis.ConnectionError("the connection was lost")
        return await real(*words, **options)

    client.execute_command = failing_load  # type: ignore[method-assign]
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        caller = asyncio.ensure_future(cell.throttle("k", 1, 1, 60))
        for _ in range(10_000):
            if cell._reloading is not None:
                break
            await asyncio.sleep(0.001)
        assert cell._reloading is not None and not caller.done()
        caller.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await caller
        await asyncio.sleep(0)
        assert cell._reloading.done()
        cell._reloading = None
        gc.collect()
        assert reported == []
    finally:
        loop.set_exception_handler(previous)
        await client.aclose()


@needs_functions
@pytest.mark.parametrize("kind", ["sync", "asyncio"])
def test_a_cluster_primary_refusing_the_load_does_not_stop_it(kind: str) -> None:
    """A cluster of its own: one primary loses the library while another
    refuses FUNCTION LOAD (its own ACL; a primary down is the same to the
    reload). The reload loads every primary it can and the call on the
    first succeeds; the other node's error used to end the load (in
    whatever order the nodes came) and fail the call."""
    nodes = servers().start_cluster(server_binary(), 3, None)
    try:
        cluster = redis.cluster.RedisCluster("127.0.0.1", nodes[0].port)
        Cell(cluster).load_functions()
        key = f"{{t:{uuid.uuid4().hex}}}"
        lost = next(n for n in nodes if n.port == cluster.get_node_from_key(key).port)
        for node in nodes:
            if node is not lost:
                node.client.execute_command("ACL SETUSER", "default", "-function|load")
        lost.client.execute_command("FUNCTION FLUSH")
        if kind == "sync":
            assert Cell(cluster, engine="functions").fw_incr(key, 2, 60).remaining == 1
        else:

            async def run() -> Decision:
                client = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=lost.port)
                try:
                    return await AsyncCell(client, engine="functions").fw_incr(key, 2, 60)
                finally:
                    await client.aclose()

            assert asyncio.run(run()).remaining == 1
        assert _library(lost.client)
        cluster.close()
    finally:
        for node in nodes:
            node.stop()
