from tests.support import draft


def test_write_then_recall_by_key(agent):
    written = agent.write("alice", draft("preference", "Python", key="primary_language"))
    assert written.results[0].memory_id
    recalled = agent.recall_keys("alice", "primary_language")
    assert [m.memory.text for m in recalled.memories] == ["Python"]
