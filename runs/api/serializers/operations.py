"""The operators' routes: servers and their pods, cleanup, store usage, comparison of runs."""

from __future__ import annotations

from rest_framework import serializers

from runs.api.serializers.fields import JsonBodySerializer, JsonBooleanField
from runs.api.serializers.runs import RunItemSerializer


class PodUsageSerializer(serializers.Serializer):
    run_id = serializers.CharField(allow_null=True)
    task_id = serializers.CharField()
    pod = serializers.CharField()
    phase = serializers.CharField()
    cores = serializers.FloatField()
    memory_gb = serializers.FloatField()


class ServerSerializer(serializers.Serializer):
    name = serializers.CharField()
    cores = serializers.FloatField(help_text="What the scheduler gives runs.")
    memory_gb = serializers.FloatField()
    gpus = serializers.IntegerField()
    reserved_by = serializers.CharField(allow_null=True)
    cores_used = serializers.FloatField()
    memory_used_gb = serializers.FloatField()
    pods = PodUsageSerializer(many=True)


class ServersSerializer(serializers.Serializer):
    servers = ServerSerializer(many=True)
    unplaced = PodUsageSerializer(many=True)


class CleanupRequestSerializer(JsonBodySerializer):
    older_than_days = serializers.FloatField(min_value=0, max_value=36_500)
    group = serializers.CharField(max_length=128, required=False, allow_blank=True)
    failed_only = JsonBooleanField(default=False)
    dry_run = JsonBooleanField(default=False)


class SkippedSerializer(serializers.Serializer):
    run = serializers.CharField()
    reason = serializers.CharField()


class CleanupResultSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    runs = serializers.ListField(child=serializers.CharField())
    paths = serializers.ListField(child=serializers.CharField(), help_text="Relative to store.")
    bytes_freed = serializers.IntegerField()
    skipped = SkippedSerializer(many=True)


class UsageSerializer(serializers.Serializer):
    runs = serializers.DictField(child=serializers.IntegerField())
    groups = serializers.DictField(child=serializers.IntegerField())
    snapshots = serializers.IntegerField()
    total = serializers.IntegerField()


class CompareRowSerializer(serializers.Serializer):
    section = serializers.CharField()
    key = serializers.CharField()
    values = serializers.ListField(child=serializers.JSONField(allow_null=True))
    differs = serializers.BooleanField()


class ComparisonSerializer(serializers.Serializer):
    runs = RunItemSerializer(many=True)
    rows = CompareRowSerializer(many=True)
    not_compared = serializers.DictField(
        child=serializers.CharField(),
        help_text=(
            "The runs whose outputs were not all compared, and why: more files or bytes than "
            "a comparison hashes, or SIMRUN_COMPARE_MAX_S passed (their files not hashed are "
            '"(not hashed)" in the outputs rows); empty when every output was compared.'
        ),
    )
