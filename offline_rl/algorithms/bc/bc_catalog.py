"""``BCCatalog``: the catalog RLlib names for BC's default module."""

from __future__ import annotations


class BCCatalog:
    """RLlib's catalog of BC's default module. In RLlib a catalog builds a module's networks;
    offline-rl's ``DefaultBCTorchRLModule`` builds its own from ``model_config`` (an MLP, with
    a ``ConvEncoder`` first when ``conv_filters`` are given) and names this class as its
    ``catalog_class``, so ``RLModuleSpec(catalog_class=BCCatalog)`` accepts that module and
    refuses others.

    Examples:
        >>> from offline_rl import DefaultBCTorchRLModule
        >>> DefaultBCTorchRLModule.catalog_class is BCCatalog
        True
    """
