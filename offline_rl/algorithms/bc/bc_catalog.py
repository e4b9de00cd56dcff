"""``BCCatalog``: the catalog RLlib names for BC's default module."""

from __future__ import annotations


class BCCatalog:
    """RLlib's catalog of BC's default module. In RLlib a catalog builds a module's networks;
    offline-rl's ``DefaultBCTorchRLModule`` builds its own from ``model_config`` (an MLP, with
    a ``ConvEncoder`` first when ``conv_filters`` are given), so the catalog names that
    module: ``RLModuleSpec(catalog_class=BCCatalog)`` accepts it as ``module_class`` and
    refuses other modules.

    Example:
        >>> BCCatalog.module_class().__name__
        'DefaultBCTorchRLModule'
    """

    @staticmethod
    def module_class() -> type:
        """The module this catalog is of (imports torch)."""
        from offline_rl.algorithms.bc.default_bc_torch_rl_module import DefaultBCTorchRLModule

        return DefaultBCTorchRLModule
