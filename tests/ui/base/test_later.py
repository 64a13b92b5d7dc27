"""A view's later parts come one loop turn a step, in order; reading one that is not
made yet makes the rest at once; a plain ``build_later`` is one turn."""

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QWidget

from explorer.ui.base.later import BuiltLater


class Steps(BuiltLater, QWidget):
    LATER = ("first", "second", "third")

    def __init__(self) -> None:
        super().__init__()
        self.made: list[str] = []
        self.later_soon()

    def build_later(self):
        for name in self.LATER:
            setattr(self, name, len(self.made))
            self.made.append(name)
            yield


class OneTurn(BuiltLater, QWidget):
    LATER = ("plots",)

    def __init__(self) -> None:
        super().__init__()
        self.later_soon()

    def build_later(self) -> None:
        self.plots = {"loss": 1}


def test_each_step_is_a_turn_of_its_own(qtbot):
    view = Steps()
    qtbot.addWidget(view)
    assert view.made == [] and not view.built()
    seen = []
    for _ in range(200):  # one pass of the event loop at a time
        QCoreApplication.processEvents()
        if not seen or seen[-1] != len(view.made):
            seen.append(len(view.made))
        if view.built():
            break
    assert view.made == ["first", "second", "third"] and view.built()
    assert seen[-3:] == [1, 2, 3]  # one step a pass, never two
    assert (view.first, view.second, view.third) == (0, 1, 2)


def test_reading_a_part_not_made_makes_the_rest_now():
    view = Steps()
    assert view.third == 2 and view.built()  # no turn ran
    assert view.made == ["first", "second", "third"]
    try:
        view.fourth  # noqa: B018 - not a later part: missing as any attribute is
    except AttributeError as e:
        assert "fourth" in str(e)
    else:
        raise AssertionError("a name that is not a later part was found")


def test_a_plain_build_later_is_one_turn(qtbot):
    view = OneTurn()
    qtbot.addWidget(view)
    qtbot.waitUntil(view.built, timeout=10_000)
    assert view.plots == {"loss": 1}
    other = OneTurn()
    qtbot.addWidget(other)
    assert other.plots == {"loss": 1} and other.built()
