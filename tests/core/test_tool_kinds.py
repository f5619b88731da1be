"""The name rule for tools no app has (read/act) and the entities of a call, from its name and arguments alone."""

from longhorizon.core.tool_kinds import entities, reads_by_name


def test_for_foreign_tools_reading_verbs_read_everything_else_acts():
    assert reads_by_name("files__read_file") and reads_by_name("mail__list_messages") and reads_by_name("calendar__free_busy")
    assert not reads_by_name("files__write_file") and not reads_by_name("mail__send_message") and not reads_by_name("shell__run")
    assert reads_by_name("get_reservation_details")  # a bare name (another benchmark's tool)


def test_sql_query_reads_only_when_it_selects():
    assert reads_by_name("sql__query", {"sql": "  SELECT * FROM t"})
    assert not reads_by_name("sql__query", {"sql": "UPDATE t SET x = 1"})


def test_entities_share_paths_across_apps_and_scope_ids_by_app():
    assert entities("files__read_file", {"path": "./reports/q3.xlsx"}) == ["path:reports/q3.xlsx"]
    assert entities("sheets__write_cells", {"path": "reports/q3.xlsx", "sheet": "S"}) == ["path:reports/q3.xlsx"]
    assert entities("tickets__update_ticket", {"ticket_id": 7, "status": "done"}) == ["tickets:ticket_id=7"]
    assert entities("x__y", "not json") == [] and entities("x__y", {"path": "", "flag": True}) == []
