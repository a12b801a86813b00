import asyncio

from toolnexus_temporal import ClusterConfig, ClusterConfigError, connect


async def main() -> None:
    client = await connect()  # flags aside, what `tnx` would use
    # ClusterConfig holds the configuration resolved, each setting with its source; arguments
    # win over the TEMPORAL_* variables, which win over the profile, then the defaults.
    config = ClusterConfig.load()
    print(config.describe())  # e.g. 127.0.0.1:7233 (namespace 'default', no TLS)
    try:  # checked before any connection: one line naming the setting and its source
        ClusterConfig.load(address="localhost:7233", tls_ca_path="/nonexistent/ca.pem")
    except ClusterConfigError as err:
        print(err)  # TLS CA (from argument tls_ca_path) file /nonexistent/ca.pem does not exist
    client = await config.connect()  # pydantic data converter, as every client
    print(f"connected to namespace {client.namespace}")


asyncio.run(main())
