import OrchestrateCLI

Orchestrate.runMain()
