"""domain/subjects.py: whose fact a memory states, and whether a question names that person."""
import pytest

from domain.subjects import question_names, third_party

THIRD_PARTIES = [   # (content as the extraction rules write it, the relation, the names in the subject)
    ("User's friend Tom lives in Paris and works as a chef", "friend", {"Tom"}),
    ("User's sister is a nurse and she loves jazz", "sister", set()),
    ("User's best friend Ana moved to Rome", "friend", {"Ana"}),
    ("User's neighbor Bob has a boat", "neighbor", {"Bob"}),
    ("User's wife 韩梅梅 is a teacher", "wife", {"韩梅梅"}),
    ("User's kids love painting", "kids", set()),
    ("用户妻子是老师", "妻子", set()),
    ("用户的朋友小王住在上海", "朋友", {"小王"}),
]
THE_USERS_OWN = ["User lives in Madrid", "User's name is Marta", "User's role is design lead", "User's diet: vegetarian",
                 "User's mom and User went hiking", "User's dog Rex is 3 years old", "User has a sister",
                 "用户住在北京", "用户和朋友去爬山了", "Caroline attended a support group"]


@pytest.mark.parametrize("content,relation,names", THIRD_PARTIES)
def test_a_relations_fact_is_a_third_partys(content, relation, names):
    assert third_party(content) == (relation, frozenset(names))


@pytest.mark.parametrize("content", THE_USERS_OWN)
def test_the_users_own_facts_are_not(content):
    assert third_party(content) is None


def test_a_question_names_the_third_party_by_relation_or_name():
    assert question_names("Where does Tom live?", "friend", frozenset({"Tom"}))
    assert question_names("What does the user's sister do?", "sister", frozenset())
    assert question_names("Tell me about my sisters", "sister", frozenset())
    assert question_names("用户的妻子做什么工作？", "妻子", frozenset())
    assert not question_names("Where does the user live?", "friend", frozenset({"Tom"}))
    assert not question_names("What is the user's job?", "sister", frozenset())
    assert not question_names("Who is the user's boyfriend?", "friend", frozenset())   # a word, not a substring
