"""``--ray-restart``: a lost Ray actor replaced by a new one (the engine's ``replacement``,
``infmon.engine.restart``), placed by the run's strategy among the nodes alive now."""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence

from infmon.engine.ray_link import RayLink, controller_node
from infmon.engine.ray_setup import NodeSlot, RayOptions, alive_nodes, ray_module


class RayReplacer:
    """``--ray-restart``: a new actor for a lost one (the engine's ``replacement``), placed by
    the run's strategy among the nodes alive now: ``spread``, on the node other than the
    controller's with the most CPUs its live actors leave free, then the controller's node, and
    the lost actor's own node last (a node that died is listed alive for a while: an actor
    bound to it would wait out ``--ray-timeout``); ``pack``, where Ray chooses. Its link checks
    its infmon and measures its clock before it takes load, as the first actors' did."""

    def __init__(
        self,
        opts: RayOptions,
        links: Sequence[RayLink],
        controller: str | None,
        say: Callable[[str], None],
    ) -> None:
        self.opts, self.controller, self.say = opts, controller, say
        self.links: list[RayLink] = list(links)

    def __call__(self, worker_id: int, lost: object) -> RayLink:
        node = None
        if self.opts.placement == "spread":
            was = lost.node_id if isinstance(lost, RayLink) else None
            node = self.node(alive_nodes(ray_module()), avoid=was)
        log_dir = self.links[0].log_dir if self.links else None
        link = RayLink(worker_id, self.opts, node, self.say, log_dir)
        self.links.append(link)
        return link

    def node(self, nodes: Sequence[NodeSlot], avoid: str | None = None) -> str | None:
        """Where the next actor goes, ``avoid`` (the lost actor's node) last (None: no node
        has a free CPU; Ray places it, or it waits until ``--ray-timeout`` and says so)."""
        busy = collections.Counter(
            link.node_id
            for link in self.links
            if link.actor is not None and not link.closed.is_set()
        )
        free = [(n.cpus - busy[n.node_id], n) for n in nodes]
        ours = {self.controller, avoid}
        pools = (
            [f for f in free if f[1].node_id not in ours],
            [f for f in free if f[1].node_id == self.controller],
            free,
        )
        for pool in pools:
            room = [f for f in pool if f[0] > 0]
            if room:
                return max(room, key=lambda f: f[0])[1].node_id
        return None


def ray_replacer(
    opts: RayOptions, links: Sequence[RayLink], say: Callable[[str], None]
) -> RayReplacer:
    """``--ray-restart``'s replacement for the actors ``ray_links`` made (Ray connected)."""
    ray = ray_module()
    return RayReplacer(opts, links, controller_node(ray, alive_nodes(ray), opts), say)
