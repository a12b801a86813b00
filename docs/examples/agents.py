"""The agents of the shell examples: run ``PYTHONPATH=docs/examples tnx-worker --registry
agents:REGISTRY`` from the repository root, where the shell examples run too (the worker's
store and ``tnx server``'s state are in ``.tnx/`` of the directory each runs in)."""

from toolnexus_temporal import AgentDef, Registry, ToolContext, define_tool, pending


def deploy(service: str, ctx: ToolContext):
    """Deploy a service (needs an approval)."""
    if ctx.answer is None:
        return pending(kind="approval", prompt=f"deploy {service}?")
    return f"deployed {service}"


REGISTRY = Registry(
    [
        AgentDef(name="worker", description="does the work"),
        AgentDef(name="ops", description="runs deployments", tools=["deploy"]),
    ],
    tools=[define_tool(deploy)],
)
