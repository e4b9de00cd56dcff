"""The old-stack page's "Converting external experiences to batch format" example, ported: run
as a script (``python tests/cartpole_app_logging_example.py``), it writes 100 episodes of random
CartPole play as SampleBatch JSON into ``<temp dir>/demo-out``.

Changed from the page: the imports (``offline_rl`` in place of ``ray.rllib``), and the output
folder: ``ray._private.utils.get_user_temp_dir()`` is gone from Ray 2.60, so the temp dir is
``tempfile.gettempdir()`` (which ``TMPDIR`` sets). The page's code already uses gymnasium's API
(``reset`` returns ``(obs, info)``, ``step`` five values). As on the page, the writer is never
closed: the file is completed when the script exits.
"""

import os
import tempfile

import gymnasium as gym
import numpy as np

from offline_rl import JsonWriter, SampleBatchBuilder, get_preprocessor

if __name__ == "__main__":
    batch_builder = SampleBatchBuilder()  # or MultiAgentSampleBatchBuilder
    writer = JsonWriter(
        os.path.join(tempfile.gettempdir(), "demo-out")
    )

    # You normally wouldn't want to manually create sample batches if a
    # simulator is available, but let's do it anyways for example purposes:
    env = gym.make("CartPole-v1")

    # RLlib uses preprocessors to implement transforms such as one-hot encoding
    # and flattening of tuple and dict observations. For CartPole a no-op
    # preprocessor is used, but this may be relevant for more complex envs.
    prep = get_preprocessor(env.observation_space)(env.observation_space)
    print("The preprocessor is", prep)

    for eps_id in range(100):
        obs, info = env.reset()
        prev_action = np.zeros_like(env.action_space.sample())
        prev_reward = 0
        terminated = truncated = False
        t = 0
        while not terminated and not truncated:
            action = env.action_space.sample()
            new_obs, rew, terminated, truncated, info = env.step(action)
            batch_builder.add_values(
                t=t,
                eps_id=eps_id,
                agent_index=0,
                obs=prep.transform(obs),
                actions=action,
                action_prob=1.0,  # put the true action probability here
                action_logp=0.0,
                rewards=rew,
                prev_actions=prev_action,
                prev_rewards=prev_reward,
                terminateds=terminated,
                truncateds=truncated,
                infos=info,
                new_obs=prep.transform(new_obs),
            )
            obs = new_obs
            prev_action = action
            prev_reward = rew
            t += 1
        writer.write(batch_builder.build_and_reset())
