"""One server per state directory."""

from __future__ import annotations

import os

import pytest
from webhook_support import Recorder

from scaffold.errors import StoreLocked
from scaffold.server.ingest import Ingest


async def test_a_second_server_on_the_same_state_dir_is_refused(settings) -> None:
    first = Ingest(settings, Recorder())
    await first.start()
    second = Ingest(settings, Recorder())
    with pytest.raises(StoreLocked) as info:
        await second.start()
    assert info.value.holder_pid == os.getpid()
    await first.stop()
    third = Ingest(settings, Recorder())
    await third.start()  # free again once the first has stopped
    await third.stop()
