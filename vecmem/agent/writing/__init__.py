"""The memory agent's write side: the gate (worth keeping at all), extraction into statements and
events, third-person rewriting, topics, supersession of what a statement revises, and learning
from messages without an answering turn."""
