"""What ships beside ``best_config.yaml``, each measured before it is recommended: the
warm-start bundle (``bundle``) and the AOTInductor ``.pt2`` of an inference run's winner
(``package``, ``compile-tune package``)."""
