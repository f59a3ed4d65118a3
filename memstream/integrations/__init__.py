"""Framework adapters over the HTTP API (optional extras; each module imports its framework).

  langgraph_store     MemstreamStore: a LangGraph BaseStore        pip install 'memstream[langgraph]'
  langchain_history   MemstreamChatMessageHistory: LangChain         pip install 'memstream[langchain]'

Both go through memstream.http_client with an API key, the trust boundary: tenants, end-user-bound
keys and scopes apply to them exactly as to any other HTTP caller.
"""
