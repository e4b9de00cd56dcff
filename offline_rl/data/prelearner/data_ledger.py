"""``DataLedger``: where PreLearner actors count what they drop or note in the data, claim
episode ids, and register themselves, for the driver to report and to stop them; one actor per
process, with a ``LedgerBook`` for each pipeline the process builds."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import ray

#: Ledger entries that count data dropped from training (the others count data kept).
DROP_REASONS = ("duplicate_episodes", "empty_episodes", "nonfinite_episodes", "nonfinite_rows",
                "out_of_bounds_episodes", "out_of_bounds_rows", "skipped_files")


class _Book:
    """One pipeline's entries (``DataLedger``'s methods, without the book's name)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.version = 0
        self.changed = asyncio.Event()
        self.sources: dict[str, str] = {}
        self.agents: dict[str, tuple[Any, str]] = {}
        self.open: set[str] = set()
        self.ended: set[str] = set()
        self.actors: list[bytes] = []

    def changed_now(self) -> None:
        """Wakes the waiting ``totals_after`` calls."""
        self.version += 1
        self.changed.set()
        self.changed = asyncio.Event()

    def totals(self) -> dict[str, int]:
        unfinished = {"unfinished_episodes": len(self.open)} if self.open else {}
        return {**self.counts, **unfinished}


@ray.remote(num_cpus=0)
class DataLedger:
    """The books of the pipelines one process builds (``open_book``), each with: totals by
    reason (``duplicate_episodes``, ``nonfinite_rows``, ``actions_out_of_bounds``, ...), the
    file each episode id was first read from, so that the same episode in two files is caught
    even when different PreLearner actors read them, the first agent id of each text read (so
    that ``0`` and ``'0'`` are told apart across actors), and the PreLearner actors of the
    pipeline, so that stopping it can release them (an actor still being created when the
    pipeline stops registers later, finds the book closed, and exits).

    One actor serves every pipeline of its process: a pipeline's start neither waits for nor
    pays a process of its own (half a CPU-second each, on a machine that may have two).

    The driver learns of new counts without asking in every iteration: it keeps one
    ``totals_after(book, version)`` call waiting, which the ledger answers as soon as the
    book's counts change. A PreLearner adds its counts before it returns the batch they
    concern, so the answer is on its way before that batch reaches a learner.

    Examples:
        >>> ledger = DataLedger.remote()
        >>> ray.get(ledger.claim.remote("book", ["a", "b"], ["x.parquet"] * 2))
        [False, False]
        >>> ray.get(ledger.claim.remote("book", ["b"], ["y.parquet"]))
        [True]
        >>> ray.get(ledger.add.remote("book", {"duplicate_episodes": 1}))
        >>> ray.get(ledger.totals_after.remote("book", 0))
        (1, {'duplicate_episodes': 1})
        >>> ray.get(ledger.close.remote("book"))[0]
        {'duplicate_episodes': 1}
        >>> ray.get(ledger.register.remote("book", b"a late actor"))  # the book is closed
        False
        >>> ray.kill(ledger)
    """

    def __init__(self) -> None:
        self._books: dict[str, _Book] = {}
        self._closed: set[str] = set()

    def _book(self, book: str) -> _Book | None:
        """The open book ``book`` (opened on its first entry), or None once it is closed: a
        pipeline's late reports, after it stopped, change nothing."""
        if book in self._closed:
            return None
        return self._books.setdefault(book, _Book())

    def register(self, book: str, pickled_actor: bytes) -> bool:
        """Records a PreLearner actor of ``book``'s pipeline, as its pickled handle: the ledger
        never unpickles it (unpickling a handle imports its class, Ray Data's, so all of Ray
        Data: about a second that the ledger's start would cost), the driver does. False when
        the book is closed: the pipeline stopped."""
        entries = self._book(book)
        if entries is not None:
            entries.actors.append(pickled_actor)
        return entries is not None

    def add(self, book: str, counts: Mapping[str, int]) -> None:
        """Adds ``counts`` to the book's totals."""
        if (entries := self._book(book)) is not None:
            entries.counts.update(counts)
            entries.changed_now()

    def note_episodes(self, book: str, open_ids: Sequence[str],
                      ended_ids: Sequence[str]) -> None:
        """Records episodes read without their end (``open_ids``) and ends read
        (``ended_ids``), whichever comes first: the episodes seen open and never ended are
        the ``unfinished_episodes`` of the totals (exact once a whole epoch has been read)."""
        if (entries := self._book(book)) is None:
            return
        entries.ended.update(ended_ids)
        closed = entries.open.intersection(ended_ids)
        opened = set(open_ids) - entries.ended - entries.open
        entries.open -= closed
        entries.open |= opened
        if closed or opened:
            entries.changed_now()

    def totals(self, book: str) -> dict[str, int]:
        """The book's totals so far."""
        entries = self._book(book)
        return {} if entries is None else entries.totals()

    async def totals_after(self, book: str, version: int) -> tuple[int, dict[str, int]]:
        """``(version, totals)`` once the book's totals are newer than ``version`` (at once if
        they already are), or the book is closed (its last totals)."""
        entries = self._book(book)
        while entries is not None and entries.version == version:  # ``close`` changes it too
            await entries.changed.wait()
        return (version, {}) if entries is None else (entries.version, entries.totals())

    def claim(self, book: str, episode_ids: Sequence[str], sources: Sequence[str]) -> list[bool]:
        """Records where each episode was read; True for an id already read from another
        source (a duplicate). Reading the same source again (a later epoch) is no duplicate."""
        if (entries := self._book(book)) is None:
            return [False] * len(episode_ids)
        return [entries.sources.setdefault(episode_id, source) != source
                for episode_id, source in zip(episode_ids, sources)]

    def first_agents(self, book: str, agents: Mapping[str, tuple[Any, str]]
                     ) -> dict[str, tuple[Any, str]]:
        """For each text of ``agents`` (text -> (agent id, where it was read)), the agent id of
        that text read first by any actor, and where: the book's, else the one given."""
        if (entries := self._book(book)) is None:
            return dict(agents)
        return {text: entries.agents.setdefault(text, entry) for text, entry in agents.items()}

    def actors(self, book: str) -> list[bytes]:
        """The pickled handles of the book's PreLearner actors registered so far."""
        entries = self._book(book)
        return [] if entries is None else list(entries.actors)

    def close(self, book: str) -> tuple[dict[str, int], list[bytes]]:
        """Closes the book: its last totals and registered actors; waiting ``totals_after``
        calls get them too, and later entries are ignored."""
        entries = self._books.pop(book, None) or _Book()
        self._closed.add(book)
        entries.changed_now()
        return entries.totals(), entries.actors


#: This process's ``DataLedger``, by the Ray node and worker ids it was started under (a
#: driver's worker id stays the same when Ray restarts; its node's does not).
_process_ledger: dict[str, ray.actor.ActorHandle] = {}


@dataclass(frozen=True)
class LedgerBook:
    """One pipeline's book in its process's ``DataLedger`` (``open_book``): what the driver
    reads; its PreLearners report to it through a ``LedgerClient``.

    Examples:
        >>> book = open_book()
        >>> LedgerClient(book).count({"nonfinite_rows": 2})
        >>> book.totals()
        {'nonfinite_rows': 2}
        >>> book.close()
        ({'nonfinite_rows': 2}, [])
        >>> open_book().ledger == book.ledger  # the process's one ledger
        True
    """

    ledger: ray.actor.ActorHandle
    name: str

    def totals(self) -> dict[str, int]:
        """The totals so far."""
        return ray.get(self.ledger.totals.remote(self.name))

    def totals_after(self, version: int) -> ray.ObjectRef:
        """A reference to ``(version, totals)``, ready once the totals are newer than
        ``version`` (``DataLedger.totals_after``)."""
        return self.ledger.totals_after.remote(self.name, version)

    def registered_actors(self) -> list[ray.actor.ActorHandle]:
        """The handles of the PreLearner actors registered so far (see ``close``)."""
        return _unpickled(ray.get(self.ledger.actors.remote(self.name)))

    def close(self) -> tuple[dict[str, int], list[ray.actor.ActorHandle]]:
        """Closes the book: its last totals, and the handles of the PreLearner actors
        registered. The bytes unpickled are only ever those ``LedgerClient.register`` pickled
        in an actor of this pipeline, passed on by Ray (which pickles every actor call's
        arguments alike): nothing read from a file, a config or a checkpoint reaches them."""
        totals, actors = ray.get(self.ledger.close.remote(self.name))
        return totals, _unpickled(actors)


class LedgerTotals:
    """A book's totals as the ledger sends them when they change (``DataLedger.totals_after``):
    ``latest()`` never blocks and gives the newest that arrived, normally before the batches
    they concern reach a learner; ``now()`` asks and waits. ``close()`` closes the book and
    keeps its last totals.

    Examples:
        >>> book = open_book()
        >>> totals = LedgerTotals(book)
        >>> LedgerClient(book).count({"nonfinite_rows": 2})
        >>> totals.now()
        {'nonfinite_rows': 2}
        >>> totals.close()
        []
        >>> totals.latest()
        {'nonfinite_rows': 2}
    """

    def __init__(self, book: LedgerBook):
        self.book = book
        self._latest: dict[str, int] = {}
        self._version = 0
        self._pending: Future | None = book.totals_after(0).future()

    def latest(self) -> dict[str, int]:
        """The newest totals that have arrived."""
        if self._pending is not None and self._pending.done():
            self._version, self._latest = self._pending.result()
            self._pending = self.book.totals_after(self._version).future()
        return dict(self._latest)

    def now(self) -> dict[str, int]:
        """The totals so far, asked for now (the last ones once closed)."""
        if self._pending is not None:
            self._latest = self.book.totals()
        return dict(self._latest)

    def close(self) -> list[ray.actor.ActorHandle]:
        """Closes the book (``LedgerBook.close``); returns the PreLearner actors registered."""
        self._latest, actors = self.book.close()
        self._pending = None
        return actors


def _unpickled(pickled_actors: list[bytes]) -> list[ray.actor.ActorHandle]:
    return [ray.cloudpickle.loads(pickled) for pickled in pickled_actors]


def open_book() -> LedgerBook:
    """A new book in this process's ``DataLedger``, which is started on the first call (and
    again after Ray restarted, or the actor died: a Tune trial's placement group took it)."""
    context = ray.get_runtime_context()
    key = f"{context.get_node_id()}/{context.get_worker_id()}"
    ledger = _process_ledger.get(key)
    if ledger is not None:
        try:
            ray.get(ledger.__ray_ready__.remote())
        except ray.exceptions.RayActorError:
            ledger = None
    if ledger is None:
        _process_ledger.clear()
        ledger = _process_ledger[key] = DataLedger.remote()
    return LedgerBook(ledger, uuid.uuid4().hex)


class LedgerClient:
    """What a PreLearner reports to its pipeline's book (``book``, a ``LedgerBook``): counts,
    episodes seen open or ended, and episode ids claimed. With no book (``None``: a PreLearner
    run in this process) nothing is reported and nothing is claimed.

    Examples:
        >>> client = LedgerClient(None)
        >>> client.count({"nonfinite_rows": 2})
        >>> client.claim(["a", "b"], ["x.parquet"] * 2)
        [False, False]
    """

    def __init__(self, book: LedgerBook | None) -> None:
        self.book = book
        #: The episode ids this client has noted open, and ended: the ledger's record of
        #: them only grows, so noting one again changes nothing and is not sent (a part
        #: mapped again in a later epoch sends nothing).
        self._noted_open: set[str] = set()
        self._noted_ended: set[str] = set()
        #: The ledger's answer to each (episode id, source) this client has claimed: it keeps
        #: an episode's first source for good, so the answer never changes and a part mapped
        #: again in a later epoch asks nothing.
        self._claims: dict[tuple[str, str], bool] = {}
        #: The ledger's answer to each (text, type) of agent id this client has asked about.
        self._agents: dict[tuple[str, type], tuple[Any, str]] = {}

    def register(self) -> None:
        """Registers the calling actor in the book, so ``OfflineData.stop()`` can kill it;
        when the book is closed (or the ledger gone), the pipeline was stopped while this actor
        was starting, and the actor exits (giving its resources back) instead of idling.
        Outside an actor, or without a book: nothing."""
        if self.book is None or ray.get_runtime_context().get_actor_id() is None:
            return
        try:
            registered = ray.get(self.book.ledger.register.remote(
                self.book.name, ray.cloudpickle.dumps(ray.get_runtime_context().current_actor)))
        except ray.exceptions.RayActorError:
            registered = False
        if not registered:
            ray.actor.exit_actor()

    def count(self, counts: Mapping[str, int]) -> None:
        """Adds the nonzero ``counts`` to the book's totals."""
        counts = {name: count for name, count in counts.items() if count}
        if counts and self.book is not None:
            ray.get(self.book.ledger.add.remote(self.book.name, counts))

    def note_episodes(self, open_ids: Sequence[str], ended_ids: Sequence[str]) -> None:
        """Notes episodes read without their end and ends read (``DataLedger.note_episodes``),
        sending only those this client has not noted before."""
        if self.book is None:
            return
        ended_ids = [id_ for id_ in ended_ids if id_ not in self._noted_ended]
        open_ids = [id_ for id_ in open_ids
                    if id_ not in self._noted_open and id_ not in self._noted_ended]
        if open_ids or ended_ids:
            ray.get(self.book.ledger.note_episodes.remote(self.book.name, open_ids, ended_ids))
            self._noted_open.update(open_ids)
            self._noted_ended.update(ended_ids)

    def claim(self, episode_ids: Sequence[str], sources: Sequence[str]) -> list[bool]:
        """For each episode, whether another source already holds it, as the ledger has seen
        across actors (``DataLedger.claim``); only pairs this client has not claimed before
        are sent."""
        if self.book is None:
            return [False] * len(episode_ids)
        pairs = list(zip(episode_ids, sources))
        new = list(dict.fromkeys(pair for pair in pairs if pair not in self._claims))
        if new:
            new_ids, new_sources = zip(*new)
            answers = ray.get(self.book.ledger.claim.remote(self.book.name, new_ids, new_sources))
            self._claims.update(zip(new, answers))
        return [self._claims[pair] for pair in pairs]

    def first_agents(self, agents: Mapping[str, tuple[Any, str]]
                     ) -> dict[str, tuple[Any, str]]:
        """For each agent id of ``agents`` (text -> (id, where it was read)), the id of its text
        read first by any actor, and where (``DataLedger.first_agents``); only ids of a text
        and type this client has not asked about before are sent."""
        if self.book is None:
            return dict(agents)
        new = {text: entry for text, entry in agents.items()
               if (text, type(entry[0])) not in self._agents}
        if new:
            answers = ray.get(self.book.ledger.first_agents.remote(self.book.name, new))
            self._agents.update({(text, type(new[text][0])): answer
                                 for text, answer in answers.items()})
        return {text: self._agents[(text, type(entry[0]))] for text, entry in agents.items()}
