"""Framework adapters: LangGraph's BaseStore and LangChain's retriever over a bank."""
