"""Gymnasium spaces to and from RLlib's dict layout, without unpickling."""

from __future__ import annotations

import base64
import io
import tracemalloc
import zlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq
import pytest

from offline_rl.codec import unpack_episode_state
from offline_rl.spaces import MAX_ARRAY_BYTES, space_from_dict, space_to_dict

FIXTURES = Path(__file__).parent / "fixtures" / "rllib_cartpole_episodes"


class Touch:
    """Unpickling this creates ``path``: a stand-in for code a malicious file would run."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (self.path,)


SPACES = [
    gym.spaces.Box(-1.0, 1.0, (3, 2), np.float32),
    gym.spaces.Box(np.array([0, -5]), np.array([10, 5]), dtype=np.int64),
    gym.spaces.Discrete(5),
    gym.spaces.Discrete(4, start=-2),
    gym.spaces.MultiBinary(6),
    gym.spaces.MultiBinary([2, 3]),
    gym.spaces.MultiDiscrete([3, 4, 2]),
    gym.spaces.MultiDiscrete([3, 4], start=[1, -1]),
    gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (2,))]),
    gym.spaces.Dict({"pos": gym.spaces.Box(-2, 2, (2,)),
                     "inner": gym.spaces.Dict({"k": gym.spaces.Discrete(3)})}),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_round_trip(space):
    restored = space_from_dict(space_to_dict(space))
    assert restored == space
    assert type(restored) is type(space)


def test_layout_matches_rllib():
    box = space_to_dict(gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
    assert sorted(box) == ["dtype", "high", "low", "shape", "space"]
    assert box["space"] == "box" and box["shape"] == (2,) and box["dtype"] == "<f4"
    low = np.load(io.BytesIO(zlib.decompress(base64.b64decode(box["low"]))))
    np.testing.assert_array_equal(low, [-1.0, -1.0])
    assert space_to_dict(gym.spaces.Discrete(3)) == {"space": "discrete", "n": 3, "start": 0}
    assert type(space_to_dict(gym.spaces.Discrete(3))["n"]) is int
    assert space_from_dict({"space": "discrete", "n": 3}) == gym.spaces.Discrete(3)
    assert space_to_dict(gym.spaces.MultiBinary(4)) == {"space": "multi-binary", "n": 4,
                                                        "dtype": "|i1"}
    multi = space_to_dict(gym.spaces.MultiDiscrete([2, 3]))
    assert sorted(multi) == ["dtype", "nvec", "space"]
    nested = space_to_dict(gym.spaces.Dict({"a": gym.spaces.Discrete(2)}))
    assert nested == {"space": "dict", "spaces": {"a": {"space": "discrete", "n": 2, "start": 0}}}


def test_none_passes_through():
    assert space_to_dict(None) is None
    assert space_from_dict(None) is None


def test_fixture_spaces_are_cartpoles():
    first_file = min(FIXTURES.rglob("*.parquet"))
    state = unpack_episode_state(pq.read_table(first_file).column("item")[0].as_py())
    env = gym.make("CartPole-v1")
    assert space_from_dict(state["_observation_space"]) == env.observation_space
    assert space_from_dict(state["_action_space"]) == env.action_space
    assert space_from_dict(state["observations"]["space"]) == env.observation_space
    rewards = space_from_dict(state["rewards"]["space"])
    assert rewards == gym.spaces.Box(-np.inf, np.inf, (), np.float32)
    # Re-serializing gives RLlib's exact text (np.save header, zlib, base64).
    assert space_to_dict(env.observation_space) == {**state["_observation_space"], "shape": (4,)}


def test_unknown_space_type_names_the_field():
    with pytest.raises(ValueError, match=r"space\.space: unknown space type 'simplex'"):
        space_from_dict({"space": "simplex", "shape": [2]})
    with pytest.raises(ValueError, match=r"space\.space: missing"):
        space_from_dict({"n": 2})
    with pytest.raises(ValueError, match="cannot serialize a Text space"):
        space_to_dict(gym.spaces.Text(5))


@pytest.mark.parametrize("field", ["low", "high", "shape", "dtype"])
def test_missing_box_field_is_named(field):
    d = space_to_dict(gym.spaces.Box(0, 1, (2,)))
    del d[field]
    with pytest.raises(ValueError, match=rf"space\.{field}: missing"):
        space_from_dict(d)


def test_malformed_fields_are_named():
    d = space_to_dict(gym.spaces.Box(0, 1, (2,)))
    with pytest.raises(ValueError, match=r"space\.low: not a base64 zlib \.npy array"):
        space_from_dict({**d, "low": "not base64!"})
    with pytest.raises(ValueError, match=r"space\.dtype"):
        space_from_dict({**d, "dtype": "no-such-dtype"})
    with pytest.raises(ValueError, match=r"space: malformed 'discrete' space"):
        space_from_dict({"space": "discrete", "n": "two"})
    nested = {"space": "tuple", "spaces": [{"space": "discrete", "n": 2}, {"space": "box"}]}
    with pytest.raises(ValueError, match=r"space\.spaces\[1\]\.shape: missing"):
        space_from_dict(nested)
    with pytest.raises(ValueError, match=r"space\.spaces: expected a dict"):
        space_from_dict({"space": "dict", "spaces": [1]})


def _packed(array: np.ndarray) -> str:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return base64.b64encode(zlib.compress(buffer.getvalue())).decode("ascii")


def _zeros_bomb(num_floats: int) -> str:
    """The packed .npy of ``num_floats`` zeros, compressed chunk by chunk (never held whole)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (num_floats,)})
    deflate = zlib.compressobj(9)
    parts = [deflate.compress(header.getvalue())]
    chunk = bytes(1 << 20)
    parts += [deflate.compress(chunk) for _ in range(num_floats * 8 >> 20)]
    return base64.b64encode(b"".join(parts) + deflate.flush()).decode("ascii")


def test_bounds_that_decompress_beyond_their_shape_are_refused_without_inflating():
    """Issue 17: ~80 KB of zlib text that inflates to 80 MB of zeros, as a 4-float Box's low;
    such bounds used to be decoded whole (GBs of RAM for bigger ones) and accepted."""
    bomb = _zeros_bomb(10_000_000)
    d = {**space_to_dict(gym.spaces.Box(-1, 1, (4,), np.float32)), "low": bomb}
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"space\.low: decompresses to more than 4128 bytes, "
                                             r"more than a \(4,\) array needs"):
            space_from_dict(d)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * 1024 * 1024
    # A declared shape as big as the bomb is refused by the absolute cap instead.
    huge = {**d, "shape": [10_000_000]}
    with pytest.raises(ValueError, match=f"more than {MAX_ARRAY_BYTES} bytes"):
        space_from_dict(huge)


def test_bounds_of_another_shape_and_deep_nesting_are_refused():
    d = space_to_dict(gym.spaces.Box(-1, 1, (4,), np.float32))
    with pytest.raises(ValueError, match=r"space\.high: an array of shape \(3,\), but the "
                                         r"space's shape is \(4,\)"):
        space_from_dict({**d, "high": _packed(np.ones(3, np.float32))})
    nested: dict = {"space": "discrete", "n": 2}
    for _ in range(450):
        nested = {"space": "tuple", "spaces": [nested]}
    with pytest.raises(ValueError, match=r"nested more than 32 deep"):
        space_from_dict(nested)


def test_pickled_array_in_a_space_is_refused(tmp_path: Path):
    marker = tmp_path / "pwned"
    buffer = io.BytesIO()
    np.save(buffer, np.array([Touch(marker)], dtype=object), allow_pickle=True)
    evil = base64.b64encode(zlib.compress(buffer.getvalue())).decode("ascii")
    d = {**space_to_dict(gym.spaces.Box(0, 1, (1,))), "low": evil}
    with pytest.raises(ValueError, match=r"space\.low: .*allow_pickle"):
        space_from_dict(d)
    assert not marker.exists()
    # The payload is live: loading it with pickles allowed creates the marker.
    np.load(io.BytesIO(buffer.getvalue()), allow_pickle=True)
    assert marker.exists()
