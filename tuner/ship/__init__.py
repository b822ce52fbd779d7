"""What ships beside ``best_config.yaml``, measured before it is recommended: the warm-start
bundle (``bundle``). The AOTInductor ``.pt2`` of an inference run's winner (``compile-tune
package``) is ``tuner/pt2/`` (``command`` orchestrates it)."""
