// placeholder: filled in by the OrchestrateCLI work
