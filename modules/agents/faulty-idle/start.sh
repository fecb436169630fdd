#!/usr/bin/env bash
echo "faulty-idle: thinking…"
while :; do sleep 1; done
