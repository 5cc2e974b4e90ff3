"""Matrix as picobridge's registry knows it: the `[matrix]` section, Matrix ids
(@alice:example.org), and the adapter built on demand (mautrix is imported only then)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from picobridge.contract import Platform

if TYPE_CHECKING:
    from picobridge.adapters.matrix.settings import MatrixSettings
    from picobridge.contract import Adapter


class MatrixPlatform(Platform):
    name: ClassVar[str] = "matrix"
    section_model: ClassVar[str] = "picobridge.adapters.matrix.settings:MatrixSettings"
    credentials: ClassVar[dict[str, str]] = {
        "matrix_access_token": "access_token",
        "matrix_password": "password",
    }
    enable_hint: ClassVar[str] = "matrix.access_token"
    user_example: ClassVar[str] = "@alice:example.org"

    def active(self, section: MatrixSettings) -> bool:
        return section.active

    def allowed_users(self, section: MatrixSettings) -> frozenset[str]:
        return frozenset(section.allowed_users)

    def user_id_problem(self, user_id: str) -> str | None:
        from picobridge.adapters.matrix.settings import USER_ID

        if not USER_ID.match(user_id):
            return "matrix user ids look like @alice:example.org"
        return None

    def adapter(self, settings: Any) -> Adapter:
        from picobridge.adapters.matrix.adapter import MatrixAdapter

        return MatrixAdapter(settings)
