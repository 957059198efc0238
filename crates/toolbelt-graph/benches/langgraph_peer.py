"""LangGraph's side of the graph_steps benchmark, on the scripted server the Rust side started.

Usage: langgraph_peer.py BASE_URL STEPS LOOPS
Prints one JSON line: seconds per super-step (with and without a checkpointer), per tool
loop and per bare pair of model calls. The Rust bench pushes the replies first.
"""

import json
import operator
import sys
import time
from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from openai import OpenAI

base_url, steps, loops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


class Counter(TypedDict):
    steps: Annotated[int, operator.add]


def tick(_state):
    return {"steps": 1}


def until(state):
    return "tick" if state["steps"] < steps else END


def counter_graph(checkpointer):
    g = StateGraph(Counter)
    g.add_node("tick", tick)
    g.add_edge(START, "tick")
    g.add_conditional_edges("tick", until, ["tick", END])
    return g.compile(checkpointer=checkpointer)


def per_step(checkpointer, runs=20):
    graph = counter_graph(checkpointer)
    config = {"recursion_limit": steps + 10}
    best = float("inf")
    for i in range(runs):
        cfg = dict(config, configurable={"thread_id": f"t{i}"})
        start = time.perf_counter()
        out = graph.invoke({"steps": 0}, cfg)
        best = min(best, time.perf_counter() - start)
        assert out["steps"] == steps
    return best / steps


@tool
def multiply(a: float, b: float) -> float:
    """Multiplies two numbers."""
    return a * b


client = OpenAI(base_url=base_url, api_key="scripted", max_retries=0)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "multiply",
            "description": "Multiplies two numbers.",
            "parameters": multiply.args_schema.model_json_schema(),
        },
    }
]


def to_openai(m):
    if isinstance(m, HumanMessage):
        return {"role": "user", "content": m.content}
    if isinstance(m, ToolMessage):
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    out = {"role": "assistant", "content": m.content or ""}
    if m.tool_calls:
        out["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
            }
            for c in m.tool_calls
        ]
    return out


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def model(state):
    r = client.chat.completions.create(
        model="scripted", messages=[to_openai(m) for m in state["messages"]], tools=TOOLS
    )
    msg = r.choices[0].message
    calls = [
        {"id": c.id, "name": c.function.name, "args": json.loads(c.function.arguments)}
        for c in msg.tool_calls or []
    ]
    return {"messages": [AIMessage(content=msg.content or "", tool_calls=calls)]}


g = StateGraph(Chat)
g.add_node("model", model)
g.add_node("tools", ToolNode([multiply]))
g.add_edge(START, "model")
g.add_conditional_edges("model", tools_condition, ["tools", END])
g.add_edge("tools", "model")
loop_graph = g.compile(checkpointer=InMemorySaver())

result = {"steps": steps}
result["step_no_checkpointer_s"] = per_step(None)
result["step_checkpointer_s"] = per_step(InMemorySaver())

start = time.perf_counter()
for i in range(loops):
    out = loop_graph.invoke(
        {"messages": [HumanMessage("What is 6 times 7?")]},
        {"configurable": {"thread_id": f"loop{i}"}},
    )
    assert out["messages"][-1].content == "42", out["messages"][-1]
result["loop_s"] = (time.perf_counter() - start) / loops

start = time.perf_counter()
for i in range(loops):
    client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "x"}], tools=TOOLS)
    client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "x"}], tools=TOOLS)
result["bare_pair_s"] = (time.perf_counter() - start) / loops
print(json.dumps(result))
