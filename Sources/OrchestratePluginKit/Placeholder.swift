// placeholder: filled in by the OrchestratePluginKit work
