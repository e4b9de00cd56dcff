"""A custom ``TorchRLModule`` written as RLlib's examples write theirs (imported by Ray's
workers, so it lives in a module of its own)."""

from __future__ import annotations

from offline_rl import (
    ENCODER_OUT,
    Columns,
    MLPEncoderConfig,
    MLPHeadConfig,
    RLModule,
    TorchRLModule,
    override,
)


class MyBCModel(TorchRLModule):
    """``train_w_bc_finetune_w_ppo.py``'s module, smaller: an encoder and a policy head."""

    @override(TorchRLModule)
    def setup(self):
        self._encoder = MLPEncoderConfig(input_dims=[4], hidden_layer_dims=[32],
                                         hidden_layer_activation="relu",
                                         output_layer_dim=None).build(framework="torch")
        self._pi = MLPHeadConfig(input_dims=[32], hidden_layer_dims=[32],
                                 hidden_layer_activation="relu", output_layer_dim=2,
                                 output_layer_activation="linear").build(framework="torch")

    @override(TorchRLModule)
    def _forward_inference(self, batch, **kwargs):
        return {Columns.ACTION_DIST_INPUTS: self._pi(self._encoder(batch)[ENCODER_OUT])}

    @override(RLModule)
    def _forward_exploration(self, batch, **kwargs):
        return self._forward_inference(batch)

    @override(RLModule)
    def _forward_train(self, batch, **kwargs):
        return self._forward_inference(batch)
