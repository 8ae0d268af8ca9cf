"""``%kstream topics TOPIC`` shows the topic's profile (HTML through the formatters ``%load_ext`` registers);
``%kstream topics`` alone still lists the topics."""

from __future__ import annotations

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import kstream_nb as ks
from tests.cluster.test_profile import DISTINCT_KEYS, orders_frame, recount, write_rows


def test_topics_topic_profiles_it(shell: InteractiveShell, url: str) -> None:
    rows = orders_frame()
    write_rows(url, "orders", rows)
    profile = shell.run_line_magic("kstream", f"topics orders --bootstrap {url} --sample 5")
    assert isinstance(profile, ks.TopicProfile)
    assert profile.to_pandas()["records"].tolist() == recount(rows)["records"].tolist()
    assert profile.sampled == 15 and profile.sampling == "last"
    assert shell.display_formatter is not None
    html = shell.display_formatter.formatters["text/html"](profile)
    assert html == profile._repr_html_()
    assert "<b>100</b> records" in html and "the last 5 records of each partition" in html
    spread = shell.run_line_magic("kstream", f"topics orders --bootstrap {url} --spread")
    assert spread.sampling == "spread" and spread.distinct_keys == DISTINCT_KEYS
    listing = shell.run_line_magic("kstream", f"topics --bootstrap {url}")
    assert isinstance(listing, pd.DataFrame) and listing["topic"].tolist() == ["orders"]
    with pytest.raises(UsageError, match="--sample must be >= 1"):
        shell.run_line_magic("kstream", f"topics orders --bootstrap {url} --sample 0")
