"""Learning: ``Learner`` (one torch module and its optimizer), ``LearnerWorker`` and
``LearnerGroup``."""
