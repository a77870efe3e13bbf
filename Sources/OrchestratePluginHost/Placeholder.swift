// placeholder: filled in by the OrchestratePluginHost work
