

def test_learn_model_shows_the_plan(qtbot):
    from explorer.ui.views.learn.model_view import ModelView
    from tests.ui.alone import Alone
    alone = Alone(qtbot)
    view = alone.view(ModelView)
    text = view.notes.text()
    assert "Chapter 4's plan, in this model" in text
    assert "5. Shortcut connections: add1, add2" in text
