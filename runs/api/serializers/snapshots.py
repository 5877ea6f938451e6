"""Snapshots of sources: their records and the provenance given with an upload or a
registration."""

from __future__ import annotations

from rest_framework import serializers

from runs.api.serializers.fields import (
    DIGEST,
    JsonBodySerializer,
    JsonBooleanField,
    QueryBooleanField,
)


class SnapshotSerializer(serializers.Serializer):
    digest = serializers.CharField()
    name = serializers.CharField(allow_blank=True)
    source_path = serializers.CharField(allow_blank=True)
    git_remote = serializers.CharField(allow_blank=True)
    git_commit = serializers.CharField(allow_blank=True)
    git_dirty = serializers.BooleanField(allow_null=True)
    files = serializers.IntegerField()
    bytes = serializers.IntegerField()
    created_by = serializers.CharField(source="created_by.name", allow_null=True, default=None)
    created_at = serializers.DateTimeField()


class ProvenanceSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
    source_path = serializers.CharField(
        max_length=1024, required=False, allow_blank=True, default=""
    )
    git_remote = serializers.CharField(
        max_length=1024, required=False, allow_blank=True, default=""
    )
    git_commit = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    git_dirty = JsonBooleanField(required=False, allow_null=True, default=None)


class ProvenanceQuerySerializer(ProvenanceSerializer):
    """The provenance of an upload, in its query."""

    git_dirty = QueryBooleanField(required=False, default=None)  # type: ignore[assignment]


class RegisterSnapshotSerializer(JsonBodySerializer, ProvenanceSerializer):
    digest = serializers.RegexField(DIGEST, help_text="A snapshot written into the store.")
