"""A rubric's prompt as fixed text around the blocks that show the sample.

A shipped rubric template extends ``_base.j2``: its system message, criteria, scale, graded
examples and closing instructions depend on the rubric alone, which does not change during a
run; the sample shows in a block or two (``inputs``, and ``task`` where the wording follows
the number of references). ``split`` renders the template once, with a marker where each such
block goes, and each prompt is then that fixed text with those blocks rendered through Jinja
for the sample between: the same prompt, with a fraction of Jinja's work per sample.

Which blocks show the sample is read from the code of the template and of every template it
extends. A block is fixed when every name read in each of its definitions is the rubric, an
environment global, or a name bound there (a loop's, a macro's), and it includes or imports
nothing with the render's context; the others are rendered per sample. Outside the blocks,
everything must be fixed in that sense. A prompt whose variables use a name bound in fixed
text renders whole, since that text might read it before binding it. A namespace, cycler or
joiner (objects one block could change for another) and ``lipsum`` (a new text on each call)
are not fixed, nor is the ``random`` filter: a block that uses one is rendered per sample, and a
template that uses one outside the blocks renders whole. So does a template that sets a
namespace's attribute, has a block anywhere but at its top level (inside a loop, ``with`` or
``filter``, a block would see what they set), shows a block other than once, or sets at its
top level a value other than plain data, a macro or an imported template (a generator a
filter made would be used up by the first prompt). Each block rendered per sample sees the
top-level names set before it in the render, as it would in the whole render.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.environment import TemplateModule
from jinja2.runtime import Macro

from rag_judge.judge.fast_sections import FastSections

__all__ = ["Split", "split"]

_MARK = "\x00rag-judge block "  # then the block's name and a NUL
# Read in fixed text without being bound there: the same for every prompt of a rubric.
_FIXED = frozenset(("rubric", "loop", "super", "caller", "varargs", "kwargs"))

# Globals that make an object one block could change for another (a namespace's attributes,
# a cycler's or joiner's position), or a different text on each call (lipsum).
_CHANGING = frozenset(("namespace", "cycler", "joiner", "lipsum"))

Block = Callable[[jinja2.runtime.Context], Iterator[str]]


@dataclass(frozen=True)
class Split:
    """The fixed pieces of a prompt, the blocks rendered between them (``shown[i]`` between
    ``pieces[i]`` and ``pieces[i + 1]``), every block's chain (``super()`` inside one reaches
    its parent's), the names the template's top level binds (its imports) for the blocks to
    read, and the names a prompt's variables must not use."""

    pieces: tuple[str, ...]
    shown: tuple[str, ...]
    blocks: dict[str, list[Block]]
    top: dict[str, dict[str, Any]]  # per block, the top-level names set where it stands
    bound: frozenset[str]
    globals: dict[str, Any]  # the template's, copied once from its chain of mappings

    def fits(self, variables: Mapping[str, Any]) -> bool:
        """Whether a prompt with ``variables`` renders to the same text split."""
        return self.bound.isdisjoint(variables)

    def render(self, template: jinja2.Template, variables: Mapping[str, Any]) -> str:
        # What template.new_context makes, less a copy of the globals' ChainMap per prompt.
        parent = {**self.globals, **variables}
        env = template.environment
        context = env.context_class(env, parent, template.name, {}, globals=self.globals)
        context.blocks = self.blocks  # read, never changed, by a block's render
        out = [self.pieces[0]]
        for name, piece in zip(self.shown, self.pieces[1:], strict=True):
            context.vars = dict(self.top[name])
            out += self.blocks[name][0](context)
            out.append(piece)
        return "".join(out)


def split(
    env: jinja2.Environment, template: jinja2.Template, variables: Mapping[str, Any]
) -> Split | None:
    """``template`` split around the blocks that show the sample, rendered with the rubric's
    ``variables``; None where the template does not qualify (see the module's docstring)."""
    found = None if template.name is None else _read(env, template.name)
    if found is None:
        return None
    live, bound = found
    context = template.new_context(dict(variables))
    own = {name: context.blocks.get(name, []) for name in live}
    marks = {name: f"{_MARK}{name}\x00" for name in live}
    top: dict[str, dict[str, Any]] = {}
    for name in live:
        context.blocks[name] = [partial(_marker, marks[name], top.setdefault(name, {}))]
    try:
        text = "".join(template.root_render_func(context))
    except jinja2.TemplateError:
        return None  # the whole render raises the same error, with the sample's variables
    if text.count(_MARK) != len(live) or any(text.count(m) != 1 for m in marks.values()):
        return None
    if not all(_unchanging(v) for names in top.values() for v in names.values()):
        return None  # a value the first prompt could use up or change for the next
    shown = sorted(live, key=lambda name: text.index(marks[name]))
    pieces = [text]
    for name in shown:
        pieces[-1:] = pieces[-1].split(marks[name])
    blocks = {name: list(chain) for name, chain in context.blocks.items()}
    for name in live:
        blocks[name] = [*own[name][:1], *blocks[name][1:]]
    # A prompt's variable named as one of the rubric's renders whole (and fails there).
    names = bound | frozenset(variables)
    return Split(tuple(pieces), tuple(shown), blocks, top, names, dict(template.globals))


def _marker(mark: str, top: dict[str, Any], context: jinja2.runtime.Context) -> Iterator[str]:
    top.update(context.vars)  # what the block sees: the names set before it, not after
    yield mark


def _unchanging(value: object) -> bool:
    """Whether ``value`` reads the same in every prompt: plain data (the sandbox lets no
    template change a list or dict), a macro, an imported template. A generator a filter made
    (``select``, ``map`` ...) is used up by the first prompt that reads it."""
    if value is None or isinstance(value, str | int | float | range | Macro | TemplateModule):
        return True
    if isinstance(value, list | tuple):
        return all(map(_unchanging, value))
    if isinstance(value, dict):
        return all(map(_unchanging, value.values()))
    return isinstance(value, FastSections)  # the shipped _sections.j2 as Python


def _read(env: jinja2.Environment, name: str) -> tuple[set[str], frozenset[str]] | None:
    """The blocks of ``name`` and the templates it extends that are not fixed, and the names
    bound in fixed text; None where the template cannot be split."""
    fixed = _FIXED | (frozenset(env.globals) - _CHANGING)
    live: set[str] = set()
    bound: set[str] = set()
    seen: set[str] = set()
    while name not in seen:
        seen.add(name)
        source, _, _ = env.loader.get_source(env, name)  # type: ignore[union-attr]
        tree = env.parse(source)
        if any(True for _ in tree.find_all(nodes.NSRef)):
            return None  # one block could change what another shows
        top_level = {id(n) for n in tree.body}
        if any(id(b) not in top_level for b in tree.find_all(nodes.Block)):
            return None  # a block inside a block, loop, filter or with: it sees their names
        for node in tree.body:
            names = _bound_if_fixed(node, fixed)
            if names is not None:
                bound |= names
            elif isinstance(node, nodes.Block):
                live.add(node.name)
            else:
                return None
        extends = list(tree.find_all(nodes.Extends))
        if not extends:
            return (live, frozenset(bound)) if live else None
        parent = extends[0].template
        if len(extends) > 1 or extends[0] not in tree.body or not isinstance(parent, nodes.Const):
            return None
        name = str(parent.value)
    return None  # a template that extends itself: Jinja's render fails, left to it


def _bound_if_fixed(node: nodes.Node, fixed: frozenset[str]) -> set[str] | None:
    """The names ``node`` binds, where every name it reads is fixed or bound in it and it
    brings in no other template's text with the render's context; else None."""
    every = [node, *node.find_all(nodes.Node)]  # find_all leaves the node itself out
    if any(isinstance(n, nodes.Include | nodes.FromImport) for n in every):
        return None
    if any(isinstance(n, nodes.Import) and n.with_context for n in every):
        return None
    bound = {n.name for n in every if isinstance(n, nodes.Name) and n.ctx in ("store", "param")}
    bound |= {n.target for n in every if isinstance(n, nodes.Import)}
    bound |= {n.name for n in every if isinstance(n, nodes.Macro)}
    if any(isinstance(n, nodes.Filter) and n.name == "random" for n in every):
        return None  # a new pick on each render
    reads = (n.name for n in every if isinstance(n, nodes.Name) and n.ctx == "load")
    return bound if all(r in fixed or r in bound for r in reads) else None
