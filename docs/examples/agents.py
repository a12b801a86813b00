"""The agents of the shell examples: run ``tnx-worker --registry agents:REGISTRY`` from this
folder (modules in the current directory import)."""

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
