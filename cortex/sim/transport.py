"""pysyncobj's transport, on the simulated network: the same acknowledgement
holding as the TCP transport (`AckHold`: nothing acknowledged before the
journal sync that covers it), messages taken from an inbox at each poll."""

from __future__ import annotations

from typing import Any

from pysyncobj.node import Node
from pysyncobj.transport import Transport

from cortex.raft.journal import DurableJournal
from cortex.raft.transport import AckHold, sync_around_poll
from cortex.sim.network import SimNetwork


class SimTransport(Transport):  # type: ignore[misc]
    def __init__(
        self,
        syncObj: Any,  # noqa: N803 (pysyncobj's names)
        selfNode: Any,  # noqa: N803
        otherNodes: Any,  # noqa: N803
        *,
        journal: DurableJournal,
        network: SimNetwork,
    ) -> None:
        super().__init__(syncObj, selfNode, otherNodes)
        self._address = str(selfNode.address)
        self._sync_obj = syncObj
        self._network = network
        self._nodes: dict[str, Node] = {str(n.address): n for n in otherNodes}
        self._inbox: list[tuple[str, Any]] = []
        self._connected = False
        self._acks = AckHold(journal, self._deliver)
        network.attach(self._address, self._receive)
        sync_around_poll(syncObj, self._after_poll, self._acks.flush)

    # -- pysyncobj's Transport ------------------------------------------------

    def tryGetReady(self) -> None:  # noqa: N802
        pass

    @property
    def ready(self) -> bool:
        return True

    def waitReady(self) -> None:  # noqa: N802
        pass

    def addNode(self, node: Any) -> None:  # noqa: N802
        self._nodes[str(node.address)] = node
        if self._connected:
            self._onNodeConnected(node)

    def dropNode(self, node: Any) -> None:  # noqa: N802
        if self._nodes.pop(str(node.address), None) is not None:
            self._onNodeDisconnected(node)

    def send(self, node: Any, message: Any) -> bool:
        return self._acks.send(node, message)

    def destroy(self) -> None:
        self._network.detach(self._address)

    # -- the network side -----------------------------------------------------

    def _deliver(self, node: Any, message: Any) -> bool:
        self._network.send(self._address, str(node.address), message)
        return True

    def _receive(self, src: str, message: Any) -> None:
        self._inbox.append((src, message))

    @property
    def has_mail(self) -> bool:
        return bool(self._inbox)

    def _after_poll(self) -> None:
        if not self._connected:
            # Links come up with the process; partitions drop messages instead.
            self._connected = True
            for node in list(self._nodes.values()):
                self._onNodeConnected(node)
        inbox, self._inbox = self._inbox, []
        for src, message in inbox:
            node = self._nodes.get(src)
            if node is not None:  # a stranger (removed, or not yet added) is ignored
                self._acks.receive(self._sync_obj, node, message, self._onMessageReceived)
        self._acks.flush()
