"""The block graph's right-click menu on a node: interventions that need no more than a
click (zero, mean-ablate, scale, knock out one head, remove the shortcut, swap the
GELU), and the way to the What if tab for those that need prompts (steer, patch)."""

from __future__ import annotations

from PySide6.QtWidgets import QMenu, QWidget

from ...core.experiments.interventions import FUNCTIONS, Change, Intervention, allowed_kinds
from ...core.gpt.nodes import (Role, activation_label, block_hook_name, expert_nodes, expert_step,
                               order_of, parse_hook, role)
from ..base.session import Session


def node_menu(session: Session, name: str, parent: QWidget, services=None) -> QMenu:
    """The graph's right-click menu on node ``name``: interventions on it, and the What
    if tab (``services.show_view``) for the rest."""
    menu = QMenu(parent)
    menu.setTitle(name)
    if session.model is not None and expert_step(name, session.model.config) is not None:
        return _expert_menu(session, name, menu)
    order = order_of(session.model.config) if session.model is not None else "pre"
    kinds = allowed_kinds(name, order)

    def add(*args, **kwargs):
        return lambda: (session.set_node(name), session.add_intervention(Intervention(*args, **kwargs)))

    menu.addSection(f"What if… ({name})")
    menu.addAction("Zero it", add(Change.ZERO, name))
    if Change.MEAN in kinds:
        menu.addAction("Mean-ablate it (its mean over the prompt)", add(Change.MEAN, name))
    scale = menu.addMenu("Scale it")
    for k in (0.5, 2.0, 5.0, -1.0):
        scale.addAction(f"× {k:g}", add(Change.SCALE, name, k=k))
    info = session.model
    if Change.HEADS in kinds and info is not None:
        heads = menu.addMenu("Knock out a head")
        for h in range(info.config.n_heads):
            heads.addAction(f"head {h}", add(Change.HEADS, name, heads=(h,)))
    for kind, title in ((Change.FORCE, "Send each token to one expert"),
                        (Change.BAN, "Ban an expert")):
        if kind in kinds and info is not None:
            experts = menu.addMenu(title)
            for e in range(info.config.n_experts):
                experts.addAction(f"expert {e}", add(kind, name, experts=(e,)))
    if Change.NO_SHORTCUT in kinds:
        menu.addAction("Remove its shortcut", add(Change.NO_SHORTCUT, name))
    if Change.ACTIVATION in kinds:
        for function in FUNCTIONS:
            menu.addAction(f"{activation_label(parse_hook(name)[1])} → {function}",
                           add(Change.ACTIVATION, name, function=function))
    menu.addSeparator()
    menu.addAction("Steer, patch, or more… (What if tab)",
                   lambda: (session.set_node(name), services and services.show_view("whatif")))
    if session.interventions:
        menu.addAction("Remove every intervention", lambda: session.set_interventions([]))
    return menu


def _expert_menu(session: Session, name: str, menu: QMenu) -> QMenu:
    """An expert's box: its steps to show, and sending every token to it or none."""
    cfg = session.model.config
    layer, expert, _ = expert_step(name, cfg)
    menu.addSection(f"Expert {expert}'s steps (the tokens routed to it)")
    for node in expert_nodes(cfg, expert):
        step = block_hook_name(layer, node.key)
        menu.addAction(f"{node.label} ({node.key})", lambda step=step: session.set_node(step))
    menu.addSection("What if…")
    order = order_of(cfg)
    for kind, key, title in ((Change.FORCE, role(order, Role.ROUTING), "Send every token to it"),
                             (Change.BAN, role(order, Role.ROUTER), "Ban it (no token goes there)")):
        target = block_hook_name(layer, key)
        menu.addAction(title, lambda kind=kind, target=target: (
            session.set_node(target),
            session.add_intervention(Intervention(kind, target, experts=(expert,)))))
    return menu
