"""Who acts: the owner, people (Django users) and agents acting for a person; their tokens."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class IdentityKind(models.TextChoices):
    OWNER = "owner", "owner"
    PERSON = "person", "person"
    AGENT = "agent", "agent"


class Identity(models.Model):
    """A person, an agent, or the owner of the lab. The kind decides the priority of runs."""

    name = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=8, choices=IdentityKind.choices)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="identity",
        help_text="The Django user a person (or the owner) logs in as.",
    )
    acts_for = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="agents",
        help_text="The person an agent acts for.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    submission_turn_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a worker last took one of its runs to submit: the identity served "
        "longest ago goes next (runs/services/fair_share.py).",
    )

    class Meta:
        verbose_name_plural = "identities"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind="agent", acts_for__isnull=False)
                | (~Q(kind="agent") & Q(acts_for__isnull=True)),
                name="identity_agent_acts_for_person",
                violation_error_message="an agent acts for a person; others act for nobody",
            ),
            models.UniqueConstraint(
                fields=["kind"], condition=Q(kind="owner"), name="identity_one_owner"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    @property
    def is_owner(self) -> bool:
        """The lab's owner: an operator, who may see the owner's pages and clean any run."""
        return self.kind == IdentityKind.OWNER

    @property
    def principal(self) -> Identity:
        """Whose runs this identity's runs count as: an agent's person, else itself."""
        return self.acts_for if self.acts_for_id is not None and self.acts_for else self


class SubmissionQueue(Identity):
    """The admin's view of the submissions waiting per identity (runs/admin.py)."""

    class Meta:
        proxy = True
        verbose_name = "submission queue"
        verbose_name_plural = "submission queue (per identity)"


class Token(models.Model):
    """A bearer token; only its SHA-256 is kept, the token itself is shown once."""

    identity = models.ForeignKey(Identity, on_delete=models.CASCADE, related_name="tokens")
    label = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12, help_text="The first characters, to recognise it.")
    hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.identity.name})"

    @property
    def active(self) -> bool:
        return self.revoked_at is None
